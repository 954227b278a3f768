import { existsSync, readFileSync, readdirSync, realpathSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { readMachODylibs } from "./macho-deps.ts";

/** What an ELF shared object asks the dynamic loader for: DT_NEEDED names and its RPATH/RUNPATH entries. */
export interface ElfDynamic {
  needed: string[];
  searchPaths: string[];
}

const DT_NEEDED = 1n;
const DT_RPATH = 15n;
const DT_RUNPATH = 29n;
const SHT_DYNAMIC = 6;

/** Reads the dynamic section of a 64-bit little-endian ELF file; null for anything else (not ELF, 32-bit). */
export function readElfDynamic(file: string): ElfDynamic | null {
  const buf = readFileSync(file);
  if (buf.length < 64 || buf.readUInt32BE(0) !== 0x7f454c46 || buf[4] !== 2 || buf[5] !== 1) return null;
  const shoff = Number(buf.readBigUInt64LE(0x28));
  const shentsize = buf.readUInt16LE(0x3a);
  const shnum = buf.readUInt16LE(0x3c);
  const sections = Array.from({ length: shnum }, (_, i) => {
    const at = shoff + i * shentsize;
    return {
      type: buf.readUInt32LE(at + 4),
      offset: Number(buf.readBigUInt64LE(at + 0x18)),
      size: Number(buf.readBigUInt64LE(at + 0x20)),
      link: buf.readUInt32LE(at + 0x28),
    };
  });
  const dynamic = sections.find((s) => s.type === SHT_DYNAMIC);
  if (!dynamic) return { needed: [], searchPaths: [] };
  const strtab = sections[dynamic.link];
  if (!strtab) return null;
  const str = (offset: bigint) => {
    const start = strtab.offset + Number(offset);
    return buf.toString("utf8", start, buf.indexOf(0, start));
  };
  const needed: string[] = [];
  const searchPaths: string[] = [];
  for (let at = dynamic.offset; at + 16 <= dynamic.offset + dynamic.size; at += 16) {
    const tag = buf.readBigUInt64LE(at);
    const value = buf.readBigUInt64LE(at + 8);
    if (tag === 0n) break;
    if (tag === DT_NEEDED) needed.push(str(value));
    else if (tag === DT_RPATH || tag === DT_RUNPATH) searchPaths.push(...str(value).split(":").filter(Boolean));
  }
  return { needed, searchPaths };
}

/**
 * The files a native addon needs beside it at load time: every regular file in its own folder
 * (libraries it dlopens by name, e.g. onnxruntime's execution providers) and, recursively,
 * every library it links that lives beside it or in a folder its own RPATH/RUNPATH names
 * relative to itself (`$ORIGIN` on Linux; `@loader_path` and `@rpath` on macOS): sharp's
 * libvips in a sibling package. System libraries (libc, libstdc++, libc++) are not found that
 * way and stay the host's.
 */
export function addonClosure(addon: string): string[] {
  const found = new Set<string>();
  const queue = [realpathSync(addon)];
  for (const entry of readdirSync(dirname(queue[0]!), { withFileTypes: true })) {
    if (entry.isFile()) queue.push(join(dirname(queue[0]!), entry.name));
  }
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (found.has(file)) continue;
    found.add(file);
    for (const hit of linkedBeside(file)) queue.push(realpathSync(hit));
  }
  return [...found].sort();
}

const isFile = (p: string) => existsSync(p) && statSync(p).isFile();

/** The libraries `file` links that are found relative to it (ELF or Mach-O); none for other files. */
function linkedBeside(file: string): string[] {
  const origin = dirname(file);
  const elf = readElfDynamic(file);
  if (elf) {
    const dirs = [
      origin,
      ...elf.searchPaths.filter((p) => p.startsWith("$ORIGIN")).map((p) => resolve(origin, p.replace(/^\$ORIGIN\/?/, "./"))),
    ];
    return elf.needed.flatMap((name) => dirs.map((d) => join(d, name)).find(isFile) ?? []);
  }
  const macho = readMachODylibs(file);
  if (!macho) return [];
  const local = (p: string) => (p.startsWith("@loader_path") ? resolve(origin, p.replace(/^@loader_path\/?/, "./")) : null);
  const rpaths = macho.rpaths.map(local).filter((p): p is string => p !== null);
  return macho.needed.flatMap((name) => {
    const candidates = name.startsWith("@rpath/")
      ? rpaths.map((d) => join(d, name.slice("@rpath/".length)))
      : [local(name)].filter((p): p is string => p !== null);
    return candidates.find(isFile) ?? [];
  });
}
