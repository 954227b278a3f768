import { readdirSync } from "node:fs";
import { join } from "node:path";

export const ROOT = join(import.meta.dir, "../..");

/** The README, CONTRIBUTING.md, the changelog and every Markdown file under docs/, as paths relative to the checkout. */
export function docFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith(".md") ? [join(dir, e.name)] : [],
    );
  return ["README.md", "CONTRIBUTING.md", "CHANGELOG.md", ...walk("docs")];
}

export interface Fence {
  lang: string;
  body: string;
}

/** The fenced code blocks of a Markdown text, in order. */
export function fences(text: string): Fence[] {
  return [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, body: m[2]! }));
}

/** The text without fenced blocks and inline code, where a `](` is code, not a link. */
export function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```$/gm, "").replace(/`[^`\n]*`/g, "");
}

/** Link targets of a Markdown text: [text](target) and ![alt](target). */
export function links(text: string): string[] {
  return [...prose(text).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes. */
export function anchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");
}

/** The anchors of a Markdown text's headings. */
export function anchors(text: string): Set<string> {
  return new Set([...prose(text).matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchor(m[1]!)));
}

/** The text of one `## ` section, heading excluded, up to the next `## ` heading. */
export function section(text: string, heading: string): string {
  const start = text.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`no section "## ${heading}"`);
  const body = text.slice(start + heading.length + 5);
  const end = body.search(/^## /m);
  return end < 0 ? body : body.slice(0, end);
}

/** The text of one `### ` part inside a section, heading excluded, up to the next `### ` heading. */
export function part(text: string, heading: string): string {
  const start = text.indexOf(`\n### ${heading}\n`);
  if (start < 0) throw new Error(`no part "### ${heading}"`);
  const body = text.slice(start + heading.length + 6);
  const end = body.search(/^### /m);
  return end < 0 ? body : body.slice(0, end);
}

/** The text of a section before its first `### ` part. */
export function before(text: string, heading: string): string {
  const end = text.indexOf(`\n### ${heading}\n`);
  if (end < 0) throw new Error(`no part "### ${heading}"`);
  return text.slice(0, end);
}
