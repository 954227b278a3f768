/** Order statistics of a sample of timings (any unit); NaN / undefined-free only when n > 0. */
export interface Summary {
  n: number;
  p50: number;
  p95: number;
  p99: number;
  mean: number;
  min: number;
  max: number;
}

/** Nearest-rank percentiles, mean, min and max of `xs`. */
export function summarize(xs: number[]): Summary {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
  return {
    n: s.length,
    p50: at(0.5),
    p95: at(0.95),
    p99: at(0.99),
    mean: s.reduce((a, b) => a + b, 0) / s.length,
    min: s[0]!,
    max: s[s.length - 1]!,
  };
}

/** The median of `xs` (the mean of the middle two when their number is even). */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
