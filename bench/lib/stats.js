'use strict';
/** Small statistics helpers over plain arrays / typed arrays of numbers. */

/** The q-quantile (0..1) of already sorted values, nearest-rank; NaN when empty. */
function quantileSorted(sorted, q) {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank];
}

function median(values) {
  const finite = values.filter((value) => Number.isFinite(value)).sort((a, b) => a - b);
  if (finite.length === 0) return Number.NaN;
  const mid = finite.length >> 1;
  return finite.length % 2 === 1 ? finite[mid] : (finite[mid - 1] + finite[mid]) / 2;
}

/** p50/p90/p99/max of a Float64Array (sorted in place). */
function summarize(latencies) {
  latencies.sort();
  return {
    count: latencies.length,
    p50: quantileSorted(latencies, 0.5),
    p90: quantileSorted(latencies, 0.9),
    p99: quantileSorted(latencies, 0.99),
    max: latencies.length ? latencies[latencies.length - 1] : Number.NaN,
  };
}

function ratio(a, b) {
  return Number.isFinite(a) && Number.isFinite(b) && b !== 0 ? a / b : Number.NaN;
}

function round(value, digits = 3) {
  if (!Number.isFinite(value)) return null;
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

module.exports = { quantileSorted, median, summarize, ratio, round };
