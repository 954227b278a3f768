import { createWriteStream, existsSync, statSync } from "node:fs";
import { once } from "node:events";
import { mkdir, rename, statfs, truncate, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Clock } from "../../runtime/clock.ts";
import { lockModelDir, type HeldLock } from "./model-dir-lock.ts";
import { MODEL_FOLDERS } from "./model-layout.ts";
import { progressBar } from "./progress-bar.ts";

const COMPLETE = ".spool-complete";

/** Whether `model` reads as a hub id (`owner/name`) rather than a path. */
export const isHubId = (model: string) => /^[\w.-]+\/[\w.-]+$/.test(model) && !model.startsWith(".");

/** Raised before any byte is written when the files will not fit on the disk. */
export class DiskSpaceError extends Error {
  override name = "DiskSpaceError";
}

export interface HubDownloadOptions {
  /** HF_TOKEN (gated models) and HF_ENDPOINT (a mirror; default https://huggingface.co). @default process.env */
  env?: Record<string, string | undefined>;
  /** Bytes free for `dir` (tests give a small quota). @default the file system's, by statfs */
  freeBytes?: (dir: string) => Promise<number>;
  /** Where the progress bar goes. @default process.stderr */
  out?: { write(text: string): unknown };
  /** How long to wait for another process downloading the same model to show progress before giving up. @default 600_000 */
  stallMs?: number;
  /** Time source of that wait. @default the wall clock */
  clock?: Clock;
}

interface HubFile {
  path: string;
  size: number;
}

/**
 * Downloads the files of a diffusers/optimum-style ONNX export from the Hugging Face hub into
 * `dir`, once: it reads every file's size first and refuses (DiskSpaceError) when the disk cannot
 * hold what is left to fetch; an interrupted file resumes where it stopped (HTTP Range); a finished
 * download, every file at its listed size, leaves a marker and is reused. Progress shows bytes and
 * rate. One process at a time downloads into `dir` (a lock file there); others started meanwhile
 * (the scaler starts several workers at once) wait for it to finish.
 */
export async function downloadFromHub(id: string, dir: string, options: HubDownloadOptions = {}): Promise<string> {
  const marker = join(dir, COMPLETE);
  if (existsSync(marker)) return dir;
  const env = options.env ?? process.env;
  const hub = (env.HF_ENDPOINT ?? "https://huggingface.co").replace(/\/+$/, "");
  const headers: Record<string, string> = env.HF_TOKEN ? { authorization: `Bearer ${env.HF_TOKEN}` } : {};
  const info = await fetch(`${hub}/api/models/${id}?blobs=true`, { headers });
  if (!info.ok) throw new Error(`hub model ${id}: HTTP ${info.status} ${(await info.text()).slice(0, 200)}`);
  const { siblings = [], sha = "main" } = (await info.json()) as {
    siblings?: { rfilename: string; size?: number; lfs?: { size?: number } }[];
    sha?: string;
  };
  for (const s of siblings) checkName(id, s.rfilename);
  const names = siblings
    .map((s) => s.rfilename)
    .filter((f) => f === "model_index.json" || MODEL_FOLDERS.some((folder) => f.startsWith(`${folder}/`)));
  if (!names.some((f) => f === "transformer/model.onnx" || f === "unet/model.onnx")) {
    throw new Error(`hub model ${id} has no transformer/model.onnx (or unet/model.onnx): it is not a diffusers/optimum-style ONNX export`);
  }
  const url = (path: string) => `${hub}/${id}/resolve/${sha}/${path}`;
  const files: HubFile[] = [];
  for (const path of names) {
    const listed = siblings.find((s) => s.rfilename === path)!;
    files.push({ path, size: listed.lfs?.size ?? listed.size ?? (await headSize(url(path), headers, id)) });
  }

  await mkdir(dir, { recursive: true });
  const out = options.out ?? process.stderr;
  const lock = await lockModelDir(dir, {
    complete: () => existsSync(marker),
    stallMs: options.stallMs ?? 600_000,
    clock: options.clock,
    out,
    label: `hub model ${id}`,
  });
  if (!lock) return dir; // another process finished it while this one waited
  try {
    await download(id, dir, files, { url, headers, out, lock, freeBytes: options.freeBytes ?? freeBytesOf });
    for (const file of files) {
      const size = existsSync(join(dir, file.path)) ? statSync(join(dir, file.path)).size : 0;
      if (size !== file.size)
        throw new Error(
          `hub model ${id}: ${file.path} has ${size} bytes on disk but the hub lists ${file.size}; run again to fetch it again`,
        );
    }
    await writeFile(marker, `${id}@${sha}\n`);
    return dir;
  } finally {
    lock.release();
  }
}

/** Fetches what is missing of `files` into `dir`, with the space check first; the caller holds the lock. */
async function download(
  id: string,
  dir: string,
  files: HubFile[],
  ctx: {
    url: (path: string) => string;
    headers: Record<string, string>;
    out: { write(text: string): unknown };
    lock: HeldLock;
    freeBytes: (dir: string) => Promise<number>;
  },
) {
  const total = files.reduce((n, f) => n + f.size, 0);
  const have = files.reduce((n, f) => n + onDisk(join(dir, f.path), f.size), 0);
  const free = await ctx.freeBytes(dir);
  if (total - have > free) {
    throw new DiskSpaceError(
      `hub model ${id} needs ${gb(total - have)} GB more on ${dir} (${gb(total)} GB in ${files.length} files, ${gb(have)} GB already there) but only ${gb(free)} GB is free: free space or set the endpoint's options.cacheDir to a larger disk`,
    );
  }

  const bar = progressBar(`downloading ${id}`, total, ctx.out);
  bar.add(have);
  for (const file of files) {
    const target = join(dir, file.path);
    if (existsSync(target) && statSync(target).size === file.size) continue;
    await mkdir(dirname(target), { recursive: true });
    await fetchResuming(ctx.url(file.path), `${target}.part`, file, ctx.headers, id, bar, ctx.lock);
    await rename(`${target}.part`, target);
  }
  bar.done();
}

/** Refuses a listed name that is not a plain relative path (a mirror must not write outside the model folder). */
function checkName(id: string, name: unknown): void {
  const plain =
    typeof name === "string" && !name.includes("\0") && name.split("/").every((part) => part !== "" && part !== "." && part !== "..");
  if (!plain) {
    throw new Error(
      `hub model ${id}: the hub lists a file named ${JSON.stringify(name)}, which is not a relative path inside the model folder (absolute, or with "..", "." or empty parts); refusing to download from it (check HF_ENDPOINT)`,
    );
  }
}

/** Appends the rest of one file to `part`, from its current size (Range), checking the final size. */
async function fetchResuming(
  url: string,
  part: string,
  file: HubFile,
  headers: Record<string, string>,
  id: string,
  bar: ReturnType<typeof progressBar>,
  lock: HeldLock,
) {
  let from = existsSync(part) ? statSync(part).size : 0;
  if (from > file.size) {
    await truncate(part, 0);
    bar.add(-from);
    from = 0;
  }
  const res = await fetch(url, { headers: from > 0 ? { ...headers, range: `bytes=${from}-` } : headers });
  if (res.status === 416 && from === file.size) return;
  if (!res.ok || !res.body) throw new Error(`hub model ${id}: ${file.path}: HTTP ${res.status}`);
  if (from > 0 && res.status !== 206) {
    // the server ignored the range: start this file over
    bar.add(-from);
    from = 0;
  }
  const sink = createWriteStream(part, { flags: from > 0 ? "a" : "w" });
  let written = from;
  try {
    for await (const chunk of res.body) {
      if (!sink.write(chunk)) await once(sink, "drain");
      written += chunk.byteLength;
      bar.add(chunk.byteLength, file.path);
      lock.beat();
    }
  } finally {
    await new Promise((done) => sink.end(done));
  }
  if (written !== file.size) throw new Error(`hub model ${id}: ${file.path}: got ${written} of ${file.size} bytes; run again to resume`);
}

async function headSize(url: string, headers: Record<string, string>, id: string): Promise<number> {
  const res = await fetch(url, { method: "HEAD", headers, redirect: "manual" });
  // the hub answers LFS files with a redirect carrying the size in x-linked-size
  const size = Number(res.headers.get("x-linked-size") ?? res.headers.get("content-length") ?? Number.NaN);
  if (!Number.isFinite(size)) throw new Error(`hub model ${id}: cannot read the size of ${url} (HTTP ${res.status})`);
  return size;
}

/** Bytes of a file already on disk: the finished file, or a partial download. */
function onDisk(target: string, size: number): number {
  if (existsSync(target) && statSync(target).size === size) return size;
  return existsSync(`${target}.part`) ? Math.min(statSync(`${target}.part`).size, size) : 0;
}

async function freeBytesOf(dir: string): Promise<number> {
  const s = await statfs(dir);
  return Number(s.bavail) * Number(s.bsize);
}

const gb = (n: number) => (n / 1e9).toFixed(2);
