/** A mapping of keys in the configuration as read from YAML, before validation. */
export type Data = Record<string, unknown>;

/** The value at `segments`, or `undefined` when any section on the way is missing or not a mapping. */
export function valueAt(data: Data, segments: string[]): unknown {
  return segments.reduce<unknown>(
    (node, name) => (isSection(node) && Object.hasOwn(node, name) ? node[name] : undefined),
    data,
  );
}

/** A mapping of keys (not null, not a list). */
export function isSection(value: unknown): value is Data {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
