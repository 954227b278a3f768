import { existsSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aptInstall, SYSTEM_PATH } from "../helpers/apt-install.ts";

/** Debian's arm64 libc, libstdc++ and libgcc for running arm64 programs on another CPU. */
const ARM64_LIBS = "/usr/aarch64-linux-gnu/lib";

/**
 * An aarch64 root for qemu-user's `-L`: the arm64 libraries at /lib, and a /proc/cpuinfo of an
 * arm64 CPU (Neoverse N1). qemu-user passes the host's x86 /proc/cpuinfo through, and
 * onnxruntime's CPU detection (pytorch/cpuinfo) crashes on it while loading; qemu reads a path
 * from the `-L` root first when the file exists there, so the program sees this one.
 */
function arm64Root(): string {
  const root = mkdtempSync(join(tmpdir(), "spool-arm64-root-"));
  symlinkSync(ARM64_LIBS, join(root, "lib"));
  mkdirSync(join(root, "proc"));
  const cpu = (n: number) =>
    `processor\t: ${n}\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\n` +
    `CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n`;
  writeFileSync(join(root, "proc", "cpuinfo"), cpu(0) + cpu(1));
  return root;
}

let ready: Promise<string[]> | undefined;

/**
 * The command prefix that runs a linux-arm64 program on this machine (`qemu-aarch64-static -L
 * <root>`), or [] on an arm64 machine. qemu-user-static and the arm64 libraries are installed from
 * Debian's apt when missing, once per test process, as the Redis setup installs redis-server.
 */
export function arm64Runner(): Promise<string[]> {
  ready ??= (async () => {
    if (process.arch === "arm64") return [];
    const find = () => Bun.which("qemu-aarch64-static", { PATH: `${process.env.PATH ?? ""}:${SYSTEM_PATH}` });
    if (!find() || !existsSync(join(ARM64_LIBS, "libstdc++.so.6"))) {
      await aptInstall(["qemu-user-static", "libc6-arm64-cross", "libstdc++6-arm64-cross", "libgcc-s1-arm64-cross"]);
    }
    const qemu = find();
    if (!qemu) throw new Error("apt-get installed qemu-user-static, but no qemu-aarch64-static program is to be found");
    return [qemu, "-L", arm64Root()];
  })();
  return ready;
}
