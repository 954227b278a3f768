/** Options of a markdown table. */
export interface TableOptions {
  /** Start and end each line with `|`. @default true */
  outerPipes?: boolean;
}

/** One markdown table line of `cells`; an empty cell is one space wide (`| machine | |`). */
export function tableRow(cells: string[], opts: TableOptions = {}): string {
  return (opts.outerPipes ?? true) ? `|${cells.map((c) => (c ? ` ${c} ` : " ")).join("|")}|` : cells.join(" | ");
}

/**
 * A markdown table as lines: `align` has one letter per column, `l` or `r` (right-aligned,
 * `---:`).
 */
export function markdownTable(head: string[], align: string, rows: string[][], opts: TableOptions = {}): string[] {
  const rule = [...align].map((a) => (a === "r" ? "---:" : "---")).join("|");
  return [tableRow(head, opts), (opts.outerPipes ?? true) ? `|${rule}|` : rule, ...rows.map((r) => tableRow(r, opts))];
}

/** Prints markdownTable's lines. */
export function printTable(head: string[], align: string, rows: string[][], opts: TableOptions = {}): void {
  for (const l of markdownTable(head, align, rows, opts)) console.log(l);
}
