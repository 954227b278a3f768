// Each script is a .lua file of lua/, imported as text: Bun embeds it in a compiled binary.
import prelude from "./lua/prelude.lua" with { type: "text" };
import epilogue from "./lua/epilogue.lua" with { type: "text" };
import oneCall from "./lua/one-call.lua" with { type: "text" };
import batch from "./lua/batch.lua" with { type: "text" };
import enqueue from "./lua/enqueue.lua" with { type: "text" };
import finish from "./lua/finish.lua" with { type: "text" };
import claim from "./lua/claim.lua" with { type: "text" };
import idemFind from "./lua/idem-find.lua" with { type: "text" };
import returnJobs from "./lua/return-jobs.lua" with { type: "text" };
import progress from "./lua/progress.lua" with { type: "text" };
import append from "./lua/append.lua" with { type: "text" };
import readStream from "./lua/read-stream.lua" with { type: "text" };
import readChunks from "./lua/read-chunks.lua" with { type: "text" };
import cancel from "./lua/cancel.lua" with { type: "text" };
import retry from "./lua/retry.lua" with { type: "text" };
import purge from "./lua/purge.lua" with { type: "text" };
import failQueued from "./lua/fail-queued.lua" with { type: "text" };
import setExpiry from "./lua/set-expiry.lua" with { type: "text" };
import position from "./lua/position.lua" with { type: "text" };
import health from "./lua/health.lua" with { type: "text" };
import scaling from "./lua/scaling.lua" with { type: "text" };
import recent from "./lua/recent.lua" with { type: "text" };
import touch from "./lua/touch.lua" with { type: "text" };
import takeStops from "./lua/take-stops.lua" with { type: "text" };
import forget from "./lua/forget.lua" with { type: "text" };
import sweep from "./lua/sweep.lua" with { type: "text" };
import lease from "./lua/lease.lua" with { type: "text" };
import startFailed from "./lua/start-failed.lua" with { type: "text" };
import startEnded from "./lua/start-ended.lua" with { type: "text" };
import reserve from "./lua/reserve.lua" with { type: "text" };
import takeDue from "./lua/take-due.lua" with { type: "text" };
import deliveryRetry from "./lua/delivery-retry.lua" with { type: "text" };
import revokeKey from "./lua/revoke-key.lua" with { type: "text" };
import appendLogs from "./lua/append-logs.lua" with { type: "text" };
import readLogs from "./lua/read-logs.lua" with { type: "text" };

/**
 * The scripts that calls arriving together share (submissions, takes and results) have a form for
 * one call (one-call.lua) and a batch form (batch.lua) that runs several in one script, one round
 * trip, in order. A call's answer is the same in both; the batch form answers a list, one entry
 * per call. This is the batch form of each.
 */
export const BATCH_FORM = { enqueue: "enqueueBatch", finish: "finishBatch", claim: "claimBatch" } as const;

const BODIES = {
  enqueue: [enqueue, oneCall],
  enqueueBatch: [enqueue, batch],
  finish: [finish, oneCall],
  finishBatch: [finish, batch],
  claim: [claim, oneCall],
  claimBatch: [claim, batch],
  idemFind: [idemFind],
  returnJobs: [returnJobs],
  progress: [progress],
  append: [append],
  readStream: [readStream],
  readChunks: [readChunks],
  cancel: [cancel],
  retry: [retry],
  purge: [purge],
  failQueued: [failQueued],
  setExpiry: [setExpiry],
  position: [position],
  health: [health],
  scaling: [scaling],
  recent: [recent],
  touch: [touch],
  takeStops: [takeStops],
  forget: [forget],
  sweep: [sweep],
  lease: [lease],
  startFailed: [startFailed],
  startEnded: [startEnded],
  reserve: [reserve],
  takeDue: [takeDue],
  deliveryRetry: [deliveryRetry],
  revokeKey: [revokeKey],
  appendLogs: [appendLogs],
  readLogs: [readLogs],
} satisfies Record<string, string[]>;

export type ScriptName = keyof typeof BODIES;

/**
 * The Lua source EVALSHA runs for each script (what SCRIPT LOAD is sent): prelude.lua (the shared
 * helpers, and the start of the function the body runs in), the body, epilogue.lua (publishing).
 */
export const SCRIPT_SOURCES = Object.fromEntries(
  Object.entries(BODIES).map(([name, parts]) => [name, [prelude, ...parts, epilogue].join("\n")]),
) as Record<ScriptName, string>;
