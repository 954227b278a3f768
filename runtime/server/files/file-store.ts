import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dataSecret, randomBase64 } from "../../config/data-secret.ts";
import { join } from "node:path";
import { checkFileName } from "../../protocol/uploads.ts";

/** Where the server keeps files that workers upload for jobs without their own s3Config. */
export interface FileStore {
  /** Stores a job's file and returns a URL for it that works for the configured time. */
  put(endpointId: string, jobId: string, name: string, data: Blob, contentType: string, now: number, origin: string): Promise<string>;
  /** Removes files past their lifetime (a bucket's own lifecycle rules do this for S3). */
  prune(now: number): number;
}

/**
 * Files kept under the data directory and served by this server at URLs signed with
 * HMAC-SHA256 that expire (7 days by default).
 */
export class LocalFileStore implements FileStore {
  readonly #dir: string;
  readonly #secret: string;

  constructor(
    dataDir: string,
    readonly ttlMs: number,
  ) {
    this.#dir = join(dataDir, "files");
    mkdirSync(this.#dir, { recursive: true });
    this.#secret = dataSecret(dataDir, "file-url-secret", () => randomBase64(32));
  }

  #path(endpointId: string, jobId: string, name: string): string {
    for (const part of [endpointId, jobId, name]) checkFileName(part);
    return join(this.#dir, endpointId, jobId, name);
  }

  // The content type lives beside the file under a leading dot, which no upload name can have,
  // so a file named "x.type" cannot overwrite the type of "x".
  #typePath(endpointId: string, jobId: string, name: string): string {
    return join(this.#dir, endpointId, jobId, `.${name}.type`);
  }

  #sign(key: string, expires: number): string {
    return new Bun.CryptoHasher("sha256", this.#secret).update(`${key}\n${expires}`).digest("hex");
  }

  /** Saves the file and returns its signed URL under `origin`/files/. */
  async put(
    endpointId: string,
    jobId: string,
    name: string,
    data: Blob,
    contentType: string,
    now: number,
    origin: string,
  ): Promise<string> {
    const path = this.#path(endpointId, jobId, name);
    mkdirSync(join(this.#dir, endpointId, jobId), { recursive: true });
    await Bun.write(path, data);
    writeFileSync(this.#typePath(endpointId, jobId, name), contentType.slice(0, 200));
    const expires = now + this.ttlMs;
    const sig = this.#sign(`${endpointId}/${jobId}/${name}`, expires);
    return `${origin}/files/${endpointId}/${jobId}/${name}?expires=${expires}&sig=${sig}`;
  }

  /** The file when the signature is right and unexpired; null otherwise. */
  get(endpointId: string, jobId: string, name: string, expires: number, sig: string, now: number): { file: Blob; type: string } | null {
    if (!Number.isFinite(expires) || expires <= now) return null;
    let path: string;
    try {
      path = this.#path(endpointId, jobId, name);
    } catch {
      return null;
    }
    const expected = this.#sign(`${endpointId}/${jobId}/${name}`, expires);
    if (sig.length !== expected.length || !crypto.timingSafeEqual(Buffer.from(sig), Buffer.from(expected))) return null;
    if (!existsSync(path)) return null;
    const typePath = this.#typePath(endpointId, jobId, name);
    const type = existsSync(typePath) ? readFileSync(typePath, "utf8") : "application/octet-stream";
    return { file: Bun.file(path), type };
  }

  /** Removes job folders older than the URL lifetime. */
  prune(now: number): number {
    let removed = 0;
    for (const ep of readdirSync(this.#dir)) {
      for (const job of readdirSync(join(this.#dir, ep))) {
        const folder = join(this.#dir, ep, job);
        if (statSync(folder).mtimeMs + this.ttlMs <= now) {
          rmSync(folder, { recursive: true, force: true });
          removed++;
        }
      }
    }
    return removed;
  }
}
