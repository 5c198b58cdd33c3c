/** Reading a gateway's `/metrics` (the management port) as Prometheus does. */

/** The value of the first series of `name` carrying every label of `labels` (0 when there is none yet). */
export async function metricValue(managementUrl: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${managementUrl}/metrics`)).text();
  const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
  for (const line of text.split('\n')) {
    const match = /^([a-z_:]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = (match[2] ?? '').split(',').filter(Boolean);
    if (wanted.every((pair) => present.includes(pair))) return Number(match[3]);
  }
  return 0;
}

/** How much `event` moves the series. */
export async function metricDelta(managementUrl: string, name: string, labels: Record<string, string>, event: () => Promise<unknown>): Promise<number> {
  const before = await metricValue(managementUrl, name, labels);
  await event();
  return (await metricValue(managementUrl, name, labels)) - before;
}
