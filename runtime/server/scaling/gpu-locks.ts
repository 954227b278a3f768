import { accessSync, constants, mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { tryFileLock, type FileLock } from "../../file-lock.ts";
import type { Log } from "../../log.ts";

/** The host-wide folder, for servers that may write there (root, or a folder made for them). */
export const HOST_GPU_LOCK_DIR = "/run/spool/gpus";

/** server.gpuLockDir, else /run/spool/gpus where this server can write, else .spool-gpus beside the data directory. */
export function gpuLockDir(server: { gpuLockDir?: string; data: string }): string {
  if (server.gpuLockDir) return resolve(server.gpuLockDir);
  try {
    mkdirSync(HOST_GPU_LOCK_DIR, { recursive: true });
    accessSync(HOST_GPU_LOCK_DIR, constants.W_OK);
    return HOST_GPU_LOCK_DIR;
  } catch {
    return join(dirname(resolve(server.data)), ".spool-gpus");
  }
}

/**
 * One lock file a GPU (`<id>.lock`) in a folder every server on the host shares: a server holds a
 * card's lock while any of its workers is on it, so no two servers hand out one card. The lock is
 * the kernel's (tryFileLock): a server killed with SIGKILL frees its cards.
 */
export class GpuLocks {
  #dir?: string;
  readonly #warned = new Set<string>();

  constructor(
    private readonly where: () => string,
    private readonly log: Log,
  ) {}

  /** The card's lock, or undefined while another server holds it (or it cannot be taken: logged once). */
  tryLock(id: string): FileLock | undefined {
    // The folder is looked for only once a worker wants a GPU: a server with none never makes it.
    if (this.#dir === undefined) {
      this.#dir = this.where();
      this.log.info("GPU locks", { dir: this.#dir });
    }
    try {
      mkdirSync(this.#dir, { recursive: true });
      return tryFileLock(join(this.#dir, `${id}.lock`));
    } catch (err) {
      if (!this.#warned.has(id)) this.log.warn("cannot lock a GPU; it is not used", { gpu: id, dir: this.#dir, error: String(err) });
      this.#warned.add(id);
      return undefined;
    }
  }
}
