/**
 * Durations and sizes as people write them in YAML and environment variables.
 *
 * Durations: a whole number of milliseconds (`5000`, `"5000"`) or one or more `<integer><unit>` parts
 * with units in decreasing order, each at most once: `200ms`, `30s`, `15m`, `8h`, `1d`, `1h30m`.
 * Sizes: a whole number of bytes or `<integer><unit>` with `b`, `kb`, `mb`, `gb` (binary multiples,
 * 1kb = 1024 bytes, as the `bytes` package used by Koa body parsers counts them); units are case-insensitive.
 * Fractions and negative values are refused: a config value should mean exactly one thing.
 */

const DURATION_UNITS: ReadonlyArray<readonly [unit: string, milliseconds: number]> = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1_000],
  ['ms', 1],
];

const SIZE_UNITS: Readonly<Record<string, number>> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

const DIGITS = /^\d+$/;
const DURATION_PART = /(\d+)(ms|d|h|m|s)/y;
const SIZE = /^(\d+)(b|kb|mb|gb)?$/i;

/** Milliseconds of a duration, or undefined when `value` is not one (see the module comment). */
export function tryParseDuration(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  if (typeof value !== 'string' || value === '') return undefined;
  if (DIGITS.test(value)) return safeInteger(Number(value));
  let total = 0;
  let lastRank = -1;
  DURATION_PART.lastIndex = 0;
  while (DURATION_PART.lastIndex < value.length) {
    const part = DURATION_PART.exec(value);
    if (part === null) return undefined;
    const rank = DURATION_UNITS.findIndex(([unit]) => unit === part[2]);
    // `1h30m` is clear; `30m1h` or `1m1m` is almost certainly a typo.
    if (rank <= lastRank) return undefined;
    lastRank = rank;
    total += Number(part[1]) * DURATION_UNITS[rank][1];
  }
  return safeInteger(total);
}

/** Bytes of a size, or undefined when `value` is not one (see the module comment). */
export function tryParseByteSize(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const match = SIZE.exec(value);
  if (match === null) return undefined;
  return safeInteger(Number(match[1]) * SIZE_UNITS[(match[2] ?? 'b').toLowerCase()]);
}

/**
 * Milliseconds of a duration such as `8h`, `15m`, `30s`, `200ms`, `1d`, `1h30m` or a number of
 * milliseconds (`0` usually means "off"). Throws a RangeError naming `key` when `value` is not a duration.
 */
export function parseDuration(value: string | number, key: string): number {
  const milliseconds = tryParseDuration(value);
  if (milliseconds === undefined) {
    throw new RangeError(`config: ${key}: ${JSON.stringify(value)} is not a duration (${DURATION_EXAMPLES})`);
  }
  return milliseconds;
}

/** Bytes of a size such as `16kb`, `1mb` or a number of bytes. Throws a RangeError naming `key` otherwise. */
export function parseByteSize(value: string | number, key: string): number {
  const bytes = tryParseByteSize(value);
  if (bytes === undefined) {
    throw new RangeError(`config: ${key}: ${JSON.stringify(value)} is not a size (${SIZE_EXAMPLES})`);
  }
  return bytes;
}

/** How a duration is written, for error messages. */
export const DURATION_EXAMPLES = 'e.g. 8h, 15m, 30s, 200ms, 1d, 1h30m or a number of milliseconds';
/** How a size is written, for error messages. */
export const SIZE_EXAMPLES = 'e.g. 16kb, 1mb or a number of bytes';

function safeInteger(value: number): number | undefined {
  return Number.isSafeInteger(value) ? value : undefined;
}
