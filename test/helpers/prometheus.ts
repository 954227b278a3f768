import parsePrometheusTextFormat, { type PrometheusFamily } from "parse-prometheus-text-format";

/** A labelled histogram: its cumulative buckets by `le`, count and sum. */
export interface HistogramSample {
  buckets: Record<string, number>;
  count: number;
  sum: number;
}

const sameLabels = (a: Record<string, string> | undefined, b: Record<string, string>) =>
  JSON.stringify(Object.entries(a ?? {}).sort()) === JSON.stringify(Object.entries(b).sort());

/**
 * A parsed exposition (through a Prometheus text-format parser, not string matching). The parser
 * folds a histogram's series together and drops their labels, so histograms are also parsed a
 * second time as plain series (their TYPE line set to untyped) to read them per label set.
 */
export class Exposition {
  readonly families: Map<string, PrometheusFamily>;
  readonly #series: Map<string, PrometheusFamily>;

  constructor(text: string) {
    this.families = new Map(parsePrometheusTextFormat(text).map((f) => [f.name, f]));
    const plain = text.replace(/^# TYPE (\S+) histogram$/gm, "# TYPE $1 untyped");
    this.#series = new Map(parsePrometheusTextFormat(plain).map((f) => [f.name, f]));
  }

  family(name: string): PrometheusFamily {
    const f = this.families.get(name);
    if (!f) throw new Error(`metric ${name} is not in the exposition`);
    return f;
  }

  /** The numeric value of a counter or gauge sample; 0 when the labelled sample does not exist yet. */
  value(name: string, labels: Record<string, string> = {}): number {
    const s = this.family(name).metrics.find((m) => sameLabels(m.labels, labels));
    return s ? Number(s.value) : 0;
  }

  /** A histogram's buckets, count and sum for one label set. */
  histogram(name: string, labels: Record<string, string>): HistogramSample {
    if (this.family(name).type !== "HISTOGRAM") throw new Error(`${name} is not a histogram`);
    const series = (suffix: string) => this.#series.get(`${name}_${suffix}`)?.metrics ?? [];
    const buckets: Record<string, number> = {};
    for (const m of series("bucket")) {
      const { le, ...rest } = m.labels ?? {};
      if (le !== undefined && sameLabels(rest, labels)) buckets[le] = Number(m.value);
    }
    const one = (suffix: string) => Number(series(suffix).find((m) => sameLabels(m.labels, labels))?.value);
    return { buckets, count: one("count"), sum: one("sum") };
  }
}
