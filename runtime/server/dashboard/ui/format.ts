/** A duration for people: 840 ms, 3.2 s, 4.1 min; a dash when unknown. */
export function ms(value: number | null | undefined): string {
  if (value === null || value === undefined) return "–";
  if (value < 1000) return `${Math.round(value)} ms`;
  if (value < 60_000) return `${(value / 1000).toFixed(1)} s`;
  return `${(value / 60_000).toFixed(1)} min`;
}

/** A time of day from an ISO string. */
export function clock(iso: string | undefined): string {
  return iso ? new Date(iso).toLocaleTimeString() : "–";
}

/** Pretty JSON for <pre>. */
export const pretty = (value: unknown): string => JSON.stringify(value, null, 2) ?? "undefined";

/** Text a job produced, when its output or chunk is text (a string, vLLM's tokens or text lists, OpenAI's choices). */
export function textOf(value: unknown): string | null {
  if (typeof value === "string") return value;
  if (Array.isArray(value)) {
    const parts = value.map(textOf);
    return parts.every((p) => p !== null) && parts.length ? parts.join("") : null;
  }
  if (value && typeof value === "object") {
    const v = value as Record<string, unknown>;
    // A stream element of the specification, {output, metrics}: the text is in its output.
    if ("output" in v && "metrics" in v) return textOf(v.output);
    if (Array.isArray(v.text) && v.text.every((t) => typeof t === "string")) return (v.text as string[]).join("");
    if (Array.isArray(v.tokens) && v.tokens.every((t) => typeof t === "string")) return (v.tokens as string[]).join("");
    if (Array.isArray(v.choices)) {
      const parts = v.choices.map(
        (c: any) => c?.text ?? c?.delta?.content ?? c?.message?.content ?? (Array.isArray(c?.tokens) ? c.tokens.join("") : null),
      );
      return parts.every((p) => typeof p === "string") ? parts.join("") : null;
    }
  }
  return null;
}

/** The first `cost` found in a job's output or chunk (US dollars). */
export function costOf(value: unknown, depth = 0): number | null {
  if (!value || typeof value !== "object" || depth > 3) return null;
  if (Array.isArray(value)) {
    for (const v of value) {
      const c = costOf(v, depth + 1);
      if (c !== null) return c;
    }
    return null;
  }
  const v = value as Record<string, unknown>;
  if (typeof v.cost === "number") return v.cost;
  for (const key of ["output", "usage"]) {
    const c = costOf(v[key], depth + 1);
    if (c !== null) return c;
  }
  return null;
}
