/** The platforms `spool build --target` makes executables for. */
export const TARGET_NAMES = ["linux-x64", "linux-arm64", "darwin-arm64", "darwin-x64"] as const;

export type TargetName = (typeof TARGET_NAMES)[number];

/** A platform a build is made for: Node's names for its OS and CPU. */
export interface Target {
  name: TargetName;
  os: "linux" | "darwin";
  arch: "x64" | "arm64";
}

/** A `--target` value that names no supported platform. */
export class TargetError extends Error {
  override name = "TargetError";
}

/** The target named `name` (`linux-arm64`...); throws a TargetError listing the others. */
export function parseTarget(name: string): Target {
  if (!(TARGET_NAMES as readonly string[]).includes(name)) {
    throw new TargetError(`--target must be one of ${TARGET_NAMES.join(", ")}, got ${name}`);
  }
  const [os, arch] = name.split("-") as [Target["os"], Target["arch"]];
  return { name: name as TargetName, os, arch };
}

/** This machine as a target; a TargetError where Spool builds for no such platform (Windows, 32-bit). */
export function hostTarget(): Target {
  const name = `${process.platform}-${process.arch}`;
  if (!(TARGET_NAMES as readonly string[]).includes(name))
    throw new TargetError(`spool build makes no binaries for this machine (${name}): pass --target, one of ${TARGET_NAMES.join(", ")}`);
  return parseTarget(name);
}

/** Whether a build for `target` runs on this machine (then Bun compiles with its own runtime, no download). */
export const isHost = (target: Target): boolean => target.os === process.platform && target.arch === process.arch;

/** Bun's `--compile` target for it: the runtime Bun fetches (once, into its own cache) and embeds. */
export const bunTarget = (target: Target): Bun.Build.CompileTarget => `bun-${target.os}-${target.arch}` as Bun.Build.CompileTarget;

/** Bun.build's compile target: none for this machine (Bun's own runtime), else the target's runtime. */
export const compileTarget = (target: Target): { target?: Bun.Build.CompileTarget } =>
  isHost(target) ? {} : { target: bunTarget(target) };
