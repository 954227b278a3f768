import { existsSync, readdirSync, realpathSync, statSync } from "node:fs";

/** `server.sandbox`: how the server confines the worker processes it starts. */
export type SandboxSetting = "auto" | "bubblewrap" | "none";

/** What one sandboxed worker may see and write; everything else of the host is read-only. */
export interface SandboxSpec {
  /** Folders and files the worker must not see at all (the server's data dir, its config file). */
  hidden: string[];
  /** Folders the worker may write (its endpoint's scratch folder), each existing already. */
  writable: string[];
  /** Device nodes bound in (GPUs); the sandbox's /dev has only the basic ones otherwise. */
  devices: string[];
}

let probed: boolean | undefined;

/**
 * Whether bubblewrap can make a sandbox here: `bwrap` on PATH, and a trial run that works (a
 * kernel without unprivileged user namespaces refuses it even where it is installed).
 */
export function bubblewrapWorks(): boolean {
  if (probed !== undefined) return probed;
  const bwrap = Bun.which("bwrap");
  if (!bwrap) return (probed = false);
  try {
    const trial = Bun.spawnSync([bwrap, ...baseArgs(), "--", "true"], { stdio: ["ignore", "ignore", "ignore"] });
    probed = trial.exitCode === 0;
  } catch {
    probed = false;
  }
  return probed;
}

/**
 * Which confinement a setting means on this machine: "bubblewrap" when asked for or (auto) when
 * it works, else "none". Asked for and missing is a configuration error the caller reports.
 */
export function sandboxMode(setting: SandboxSetting): "bubblewrap" | "none" {
  if (setting === "none") return "none";
  if (setting === "bubblewrap") {
    if (!bubblewrapWorks())
      throw new Error(
        'server.sandbox = "bubblewrap", but bwrap is not installed or cannot make a sandbox here (install the bubblewrap package, or set server.sandbox = "auto")',
      );
    return "bubblewrap";
  }
  return bubblewrapWorks() ? "bubblewrap" : "none";
}

/**
 * The process tree lives in a PID namespace of its own that dies with its first process, and
 * with the process that started bwrap (the kernel's parent-death signal); the host is seen
 * read-only, with a fresh /proc (no other process's environment) and a minimal /dev. The
 * network is the host's: workers reach the server on loopback.
 */
function baseArgs(): string[] {
  return ["--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"];
}

/** The bwrap command line that runs `command` in the sandbox `spec` describes. */
export function bubblewrapCommand(command: string[], spec: SandboxSpec): string[] {
  const args = [Bun.which("bwrap") ?? "bwrap", ...baseArgs()];
  // bwrap mounts on the real path: a symlinked data dir or config file would otherwise fail the
  // mount (every start), or leave the real path visible.
  const real = (path: string) => (existsSync(path) ? realpathSync(path) : path);
  spec = { ...spec, hidden: spec.hidden.map(real), writable: spec.writable.map(real) };
  for (const path of spec.hidden) {
    if (!existsSync(path)) continue;
    // A folder becomes an empty one; a file cannot be opened.
    if (statSync(path).isDirectory()) args.push("--tmpfs", path);
    else args.push("--ro-bind", "/dev/null", path);
  }
  for (const path of spec.writable) args.push("--bind", path, path);
  // The empty folders are read-only too, once the writable folders inside them are mounted.
  for (const path of spec.hidden) if (existsSync(path) && statSync(path).isDirectory()) args.push("--remount-ro", path);
  for (const path of spec.devices) if (existsSync(path)) args.push("--dev-bind", path, path);
  return [...args, "--", ...command];
}

/** The device nodes a GPU worker needs: NVIDIA's (CUDA) and the DRM render nodes (Vulkan). */
export function gpuDeviceNodes(): string[] {
  let names: string[] = [];
  try {
    names = readdirSync("/dev");
  } catch {
    return [];
  }
  const nodes = names.filter((n) => n.startsWith("nvidia")).map((n) => `/dev/${n}`);
  if (existsSync("/dev/dri")) nodes.push("/dev/dri");
  return nodes;
}
