import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import type { EndpointStats } from "./api.ts";

/** Median delay and execution time per minute over the last 30 minutes (uPlot). */
export function StatsChart({ stats, label }: { stats: EndpointStats; label: string }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  useEffect(() => {
    const data: uPlot.AlignedData = [
      stats.series.map((s) => s.minute / 1000),
      stats.series.map((s) => s.delayP50),
      stats.series.map((s) => s.executionP50),
    ];
    if (!plot.current && box.current) {
      plot.current = new uPlot(
        {
          width: 300,
          height: 120,
          legend: { show: true, live: false },
          axes: [
            { size: 28, font: "11px system-ui" },
            { size: 56, font: "11px system-ui", values: (_u, vals) => vals.map((v) => (v >= 1000 ? `${v / 1000}s` : `${v}ms`)) },
          ],
          // Points as well as lines: a minute with jobs between empty ones is still seen.
          series: [
            {},
            { label: "delay p50", stroke: "#8a4b00", width: 2, spanGaps: true, points: { show: true, size: 5, fill: "#8a4b00" } },
            { label: "execution p50", stroke: "#0b5cad", width: 2, spanGaps: true, points: { show: true, size: 5, fill: "#0b5cad" } },
          ],
        },
        data,
        box.current,
      );
    } else plot.current?.setData(data);
  }, [stats]);
  useEffect(() => () => plot.current?.destroy(), []);
  return <div class="chart" role="img" aria-label={label} ref={box} />;
}
