/** A fetch that never hangs a test and reports how long the answer took (for fail-fast assertions). */
export interface Answer {
  status: number;
  headers: Headers;
  body: string;
  elapsedMs: number;
}

export async function timed(url: string, init: RequestInit = {}, timeoutMs = 10_000): Promise<Answer> {
  const started = Date.now();
  const response = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  const body = await response.text();
  return { status: response.status, headers: response.headers, body, elapsedMs: Date.now() - started };
}
