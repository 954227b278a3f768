import { closeSync, openSync, readSync } from "node:fs";

/** What a native file was built for, read from its header. */
export interface BinaryPlatform {
  format: "elf" | "mach-o" | "pe";
  os: "linux" | "darwin" | "win32";
  /** Node's names (`x64`, `arm64`); other CPUs as `machine-<number>`. */
  arch: string;
}

const ELF_MACHINES: Record<number, string> = { 0x3e: "x64", 0xb7: "arm64", 0x28: "arm", 0xf3: "riscv64", 0x15: "ppc64", 0x16: "s390x" };
const MACHO_CPUS: Record<number, string> = { 0x01000007: "x64", 0x0100000c: "arm64" };
const PE_MACHINES: Record<number, string> = { 0x8664: "x64", 0xaa64: "arm64", 0x14c: "ia32" };

/** The platform of an executable, shared library or addon from its first bytes; null for any other file. */
export function binaryPlatform(head: Uint8Array): BinaryPlatform | null {
  const b = Buffer.from(head.buffer, head.byteOffset, head.byteLength);
  // The ident's class, byte order and version must be valid too: the 4-byte magic alone turns up in compressed data.
  if (b.length >= 24 && b.readUInt32BE(0) === 0x7f454c46 && (b[4] === 1 || b[4] === 2) && (b[5] === 1 || b[5] === 2) && b[6] === 1) {
    const u16 = (at: number) => (b[5] === 2 ? b.readUInt16BE(at) : b.readUInt16LE(at));
    const version = b[5] === 2 ? b.readUInt32BE(20) : b.readUInt32LE(20);
    if (u16(16) < 1 || u16(16) > 4 || version !== 1) return null; // e_type: relocatable, executable, shared object, core
    const machine = u16(18);
    return { format: "elf", os: "linux", arch: ELF_MACHINES[machine] ?? `machine-${machine}` };
  }
  if (
    b.length >= 16 &&
    (b.readUInt32LE(0) === 0xfeedfacf || b.readUInt32LE(0) === 0xfeedface) &&
    b.readUInt32LE(12) >= 1 &&
    b.readUInt32LE(12) <= 12
  ) {
    const cpu = b.readUInt32LE(4);
    return { format: "mach-o", os: "darwin", arch: MACHO_CPUS[cpu] ?? `machine-${cpu}` };
  }
  if (b.length >= 0x40 && b.readUInt16LE(0) === 0x5a4d) {
    const pe = b.readUInt32LE(0x3c);
    if (pe + 6 <= b.length && b.readUInt32BE(pe) === 0x50450000) {
      const machine = b.readUInt16LE(pe + 4);
      return { format: "pe", os: "win32", arch: PE_MACHINES[machine] ?? `machine-${machine}` };
    }
  }
  return null;
}

/** binaryPlatform of a file on disk, reading only its header. */
export function filePlatform(path: string): BinaryPlatform | null {
  const fd = openSync(path, "r");
  try {
    const head = Buffer.alloc(4096);
    return binaryPlatform(head.subarray(0, readSync(fd, head, 0, head.length, 0)));
  } finally {
    closeSync(fd);
  }
}
