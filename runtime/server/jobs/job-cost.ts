/** Above this a reported cost is nonsense (and would not fit usage's 10-decimal integer sums). */
const MAX_COST_USD = 1e6;

/**
 * The cost a completed job's output reports, in US dollars: `output.cost`, or the sum of the
 * `cost` of each element when the output is a list (the text model's outputs). Undefined when
 * the output reports none (custom handlers) or an impossible one, so nothing is charged.
 */
export function costOf(output: unknown): number | undefined {
  const one = (o: unknown) => {
    const c = (o as { cost?: unknown } | null)?.cost;
    return typeof c === "number" && Number.isFinite(c) && c >= 0 && c <= MAX_COST_USD ? c : undefined;
  };
  if (Array.isArray(output)) {
    const costs = output.map(one).filter((c): c is number => c !== undefined);
    const sum = costs.reduce((a, b) => a + b, 0);
    return costs.length && sum <= MAX_COST_USD ? sum : undefined;
  }
  return one(output);
}
