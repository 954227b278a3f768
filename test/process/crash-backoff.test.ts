import { describe, expect, test } from "bun:test";
import { afterCrash } from "../../runtime/process/crash-backoff.ts";

/** The waits before each start after `n` crashes in a row of processes that each lived `livedMs`. */
function waits(n: number, livedMs: number): number[] {
  const out: number[] = [];
  let crashes = 0;
  for (let i = 0; i < n; i++) {
    const next = afterCrash(crashes, livedMs);
    crashes = next.crashes;
    out.push(next.waitMs);
  }
  return out;
}

describe("crash backoff (the scaler's and the supervisor's)", () => {
  test("0.5 s after a crash, doubling with each crash in a row, up to 30 s", () => {
    expect(waits(9, 1_000)).toEqual([500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
    expect(waits(2_000, 1_000).at(-1)).toBe(30_000); // no overflow after a long run
  });

  test("a process that lived a minute before it crashed starts the count again", () => {
    expect(afterCrash(6, 59_999)).toEqual({ crashes: 7, waitMs: 30_000 });
    expect(afterCrash(6, 60_000)).toEqual({ crashes: 1, waitMs: 500 });
  });
});
