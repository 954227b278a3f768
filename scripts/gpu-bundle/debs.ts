/**
 * The Vulkan loader's Debian packages (amd64) that a GPU check bundle carries, for a machine
 * whose image has a GPU driver but no libvulkan.so.1. The NVIDIA driver's Vulkan ICD needs the
 * loader and glvnd's dispatch library; the list is the one known to run Vulkan on those machines.
 */
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";

export const VULKAN_PACKAGES = ["libvulkan1", "libglvnd0", "libegl1", "libopengl0", "libgl1", "libglx0", "libgles2"];

const AMD64 = ["-oAPT::Architecture=amd64", "-oAPT::Architectures=amd64"];

/** The .deb files in `dir`, one per package, downloaded with apt-get on first use. Throws with what to do when apt-get cannot. */
export function vulkanDebs(dir: string): string[] {
  const found = () => {
    const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith(".deb")) : [];
    const pick = VULKAN_PACKAGES.map((p) => files.find((f) => f.startsWith(`${p}_`)));
    return pick.every(Boolean) ? pick.map((f) => join(dir, f!)) : null;
  };
  const have = found();
  if (have) return have;
  const apt = Bun.which("apt-get");
  if (!apt)
    throw new Error(
      `the Vulkan loader's packages (${VULKAN_PACKAGES.join(" ")}) are not in ${dir}, and there is no apt-get here to download them: put their amd64 .deb files there, or build with --no-debs for a GPU machine that has libvulkan.so.1`,
    );
  mkdirSync(join(dir, "lists", "partial"), { recursive: true });
  // Lists of their own, so the machine's apt state is left as it is, and amd64 whatever this machine is.
  const options = [...AMD64, `-oDir::State::Lists=${join(dir, "lists")}`];
  for (const args of [["update"], ["download", ...VULKAN_PACKAGES]]) {
    const r = Bun.spawnSync([apt, ...options, ...args], { cwd: dir, stdout: "pipe", stderr: "pipe" });
    if (r.exitCode !== 0) {
      throw new Error(
        `apt-get ${args[0]} of the Vulkan loader's packages failed (exit ${r.exitCode}): ${r.stderr.toString().trim().split("\n").slice(-4).join("\n")}\nbuild with --no-debs for a GPU machine that has libvulkan.so.1`,
      );
    }
  }
  const got = found();
  if (!got) throw new Error(`apt-get download did not leave all of ${VULKAN_PACKAGES.join(", ")} in ${dir}`);
  return got;
}
