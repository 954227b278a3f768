/**
 * The cost a completed job's output reports, in US dollars: `output.cost`, or the sum of the
 * `cost` of each element when the output is a list (the text model's outputs). Undefined when
 * the output reports none (custom handlers), so nothing is charged.
 */
export function costOf(output: unknown): number | undefined {
  const one = (o: unknown) => {
    const c = (o as { cost?: unknown } | null)?.cost;
    return typeof c === "number" && Number.isFinite(c) && c >= 0 ? c : undefined;
  };
  if (Array.isArray(output)) {
    const costs = output.map(one).filter((c): c is number => c !== undefined);
    return costs.length ? costs.reduce((a, b) => a + b, 0) : undefined;
  }
  return one(output);
}
