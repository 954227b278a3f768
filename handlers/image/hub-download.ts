import { existsSync } from "node:fs";
import { mkdir, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { MODEL_FOLDERS } from "./model-files.ts";

const HUB = "https://huggingface.co";
const COMPLETE = ".spool-complete";

/** Whether `model` reads as a hub id (`owner/name`) rather than a path. */
export const isHubId = (model: string) => /^[\w.-]+\/[\w.-]+$/.test(model) && !model.startsWith(".");

/**
 * Downloads the files of a diffusers-style ONNX export from the Hugging Face hub into `dir`,
 * once: a finished download leaves a marker and is reused; an interrupted one starts over file
 * by file (finished files are kept). Progress goes to stderr as a bar. HF_TOKEN, when set,
 * authenticates (gated models).
 */
export async function downloadFromHub(id: string, dir: string, env: Record<string, string | undefined> = process.env): Promise<string> {
  if (existsSync(join(dir, COMPLETE))) return dir;
  const headers: Record<string, string> = env.HF_TOKEN ? { authorization: `Bearer ${env.HF_TOKEN}` } : {};
  const info = await fetch(`${HUB}/api/models/${id}?blobs=true`, { headers });
  if (!info.ok) throw new Error(`hub model ${id}: HTTP ${info.status} ${(await info.text()).slice(0, 200)}`);
  const { siblings = [], sha = "main" } = (await info.json()) as { siblings?: { rfilename: string; size?: number }[]; sha?: string };
  const wanted = siblings.filter((s) => s.rfilename === "model_index.json" || MODEL_FOLDERS.some((f) => s.rfilename.startsWith(`${f}/`)));
  if (!wanted.some((s) => s.rfilename === "transformer/model.onnx")) {
    throw new Error(`hub model ${id} has no transformer/model.onnx: it is not a diffusers-style ONNX export`);
  }
  const total = wanted.reduce((n, s) => n + (s.size ?? 0), 0);
  const bar = progressBar(`downloading ${id}`, total);
  for (const file of wanted) {
    const target = join(dir, file.rfilename);
    if (existsSync(target)) {
      bar.add(file.size ?? 0);
      continue;
    }
    await mkdir(dirname(target), { recursive: true });
    const res = await fetch(`${HUB}/${id}/resolve/${sha}/${file.rfilename}`, { headers });
    if (!res.ok || !res.body) throw new Error(`hub model ${id}: ${file.rfilename}: HTTP ${res.status}`);
    const part = `${target}.part`;
    const sink = Bun.file(part).writer();
    for await (const chunk of res.body) {
      sink.write(chunk);
      bar.add(chunk.byteLength, file.rfilename);
    }
    await sink.end();
    await rename(part, target);
  }
  bar.done();
  await writeFile(join(dir, COMPLETE), `${id}@${sha}\n`);
  return dir;
}

function progressBar(label: string, total: number) {
  let done = 0;
  let shown = -1;
  const gb = (n: number) => (n / 1e9).toFixed(2);
  return {
    add(bytes: number, file = "") {
      done += bytes;
      const pct = total ? Math.floor((done / total) * 100) : 0;
      if (pct === shown) return;
      shown = pct;
      const filled = Math.round(pct / 4);
      process.stderr.write(`\r${label} [${"#".repeat(filled)}${".".repeat(25 - filled)}] ${pct}% ${gb(done)}/${gb(total)} GB ${file.padEnd(40).slice(0, 40)}`);
    },
    done: () => process.stderr.write(`\r${label}: done, ${gb(done)} GB${" ".repeat(60)}\n`),
  };
}
