/** A one-line progress bar of a transfer: percent, bytes done of total and the rate since it began. */
export function progressBar(label: string, total: number, out: { write(text: string): unknown }, now = () => performance.now()) {
  const started = now();
  let done = 0;
  let fresh = 0;
  let shownAt = -Infinity;
  const gb = (n: number) => (n / 1e9).toFixed(2);
  const rate = () => {
    const seconds = (now() - started) / 1000;
    return seconds > 0 ? `${(fresh / seconds / 1e6).toFixed(1)} MB/s` : "";
  };
  return {
    /** Counts bytes; the first call may report what was already on disk (not counted in the rate). */
    add(bytes: number, file = "") {
      done += bytes;
      if (file) fresh += bytes;
      const t = now();
      if (t - shownAt < 250 && done < total) return;
      shownAt = t;
      const pct = total ? Math.floor((done / total) * 100) : 100;
      const filled = Math.round(pct / 4);
      out.write(
        `\r${label} [${"#".repeat(filled)}${".".repeat(25 - filled)}] ${pct}% ${gb(done)}/${gb(total)} GB ${rate()} ${file.padEnd(32).slice(0, 32)}`,
      );
    },
    done: () => out.write(`\r${label}: done, ${gb(done)} GB at ${rate()}${" ".repeat(40)}\n`),
  };
}
