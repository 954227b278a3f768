import { useEffect, useRef } from "preact/hooks";
import type { DashboardEvent, EventsHub } from "./events-hub.ts";

/**
 * Calls `refresh` now, on every event of endpoint `ep` (at most once per `minGapMs`) and every
 * `everyMs` (worker states change without job events).
 */
export function useLiveRefresh(
  hub: EventsHub,
  ep: string,
  refresh: () => Promise<void>,
  opts: { minGapMs?: number; everyMs?: number } = {},
  deps: unknown[] = [],
) {
  const latest = useRef(refresh);
  latest.current = refresh;
  useEffect(() => {
    const minGap = opts.minGapMs ?? 1000;
    let last = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let running = false;
    const run = async () => {
      if (running) return;
      running = true;
      last = Date.now();
      try {
        await latest.current();
      } catch {
        // Shown by the view; the next event or tick tries again.
      } finally {
        running = false;
      }
    };
    const schedule = () => {
      if (timer) return;
      timer = setTimeout(
        () => {
          timer = undefined;
          void run();
        },
        Math.max(0, last + minGap - Date.now()),
      );
    };
    void run();
    const off = hub.on((e: DashboardEvent) => {
      if (e.endpointId === ep) schedule();
    });
    const tick = setInterval(schedule, opts.everyMs ?? 10_000);
    return () => {
      off();
      clearInterval(tick);
      if (timer) clearTimeout(timer);
    };
  }, [hub, ep, ...deps]);
}
