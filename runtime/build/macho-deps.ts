import { readFileSync } from "node:fs";

/** What a Mach-O library asks dyld for: its load commands' library names and LC_RPATH entries, as written. */
export interface MachODylibs {
  /** `@rpath/libvips-cpp.dylib`, `@loader_path/x.dylib`, `/usr/lib/libc++.1.dylib`... */
  needed: string[];
  rpaths: string[];
}

const LC_LOAD_DYLIB = 0xc;
const LC_LOAD_WEAK_DYLIB = 0x80000018;
const LC_REEXPORT_DYLIB = 0x8000001f;
const LC_LAZY_LOAD_DYLIB = 0x20;
const LC_RPATH = 0x8000001c;
const LOADS = new Set([LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB, LC_REEXPORT_DYLIB, LC_LAZY_LOAD_DYLIB]);

/** Reads the load commands of a 64-bit little-endian Mach-O file; null for anything else. */
export function readMachODylibs(file: string): MachODylibs | null {
  const buf = readFileSync(file);
  if (buf.length < 32 || buf.readUInt32LE(0) !== 0xfeedfacf) return null;
  const ncmds = buf.readUInt32LE(16);
  const needed: string[] = [];
  const rpaths: string[] = [];
  let at = 32;
  for (let i = 0; i < ncmds && at + 12 <= buf.length; i++) {
    const cmd = buf.readUInt32LE(at);
    const size = buf.readUInt32LE(at + 4);
    if (size < 8) break; // damaged: stop rather than loop
    if (LOADS.has(cmd) || cmd === LC_RPATH) {
      const start = at + buf.readUInt32LE(at + 8);
      const end = buf.indexOf(0, start);
      const text = buf.toString("utf8", start, end < 0 || end > at + size ? at + size : end);
      (cmd === LC_RPATH ? rpaths : needed).push(text);
    }
    at += size;
  }
  return { needed, rpaths };
}
