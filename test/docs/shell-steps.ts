/** One command of a shell block as a reader types it, with the answer the block shows for it. */
export interface Step {
  command: string;
  /** The comment lines right below the command: its answer, `…` where it varies. */
  expected: string[];
}

/**
 * Splits a shell block into commands (a line ending in `\` goes on). A comment right below a
 * command shows its answer; a comment after a blank line introduces what follows.
 */
export function steps(block: string): Step[] {
  const out: Step[] = [];
  let attached: Step | null = null;
  let pending = "";
  for (const line of block.split("\n")) {
    if (pending || line.endsWith("\\")) {
      pending = pending ? `${pending}\n${line}` : line;
      if (!line.endsWith("\\")) out.push((attached = { command: pending, expected: [] })), (pending = "");
    } else if (!line.trim()) attached = null;
    else if (line.startsWith("#")) attached?.expected.push(line.replace(/^# ?/, ""));
    else out.push((attached = { command: line, expected: [] }));
  }
  return out;
}

/** Why an output does not match what the block shows for it, or null when it does. */
export function mismatch(output: string, expected: string): string | null {
  let text = output.trim();
  if (expected.startsWith("{")) {
    let value: unknown;
    try {
      value = JSON.parse(text);
      text = JSON.stringify(value);
    } catch {
      return `not JSON: ${text.slice(0, 200)}`;
    }
    const keys = Object.keys(value ?? {});
    const shown = topLevelKeys(expected);
    if (shown.some((k) => !keys.includes(k))) return `keys ${keys.join(", ")}, not ${shown.join(", ")}: ${text.slice(0, 300)}`;
    // Each "key":"value" shown must be there; `…` stands for what varies.
    for (const [, key, value] of expected.matchAll(/"([^"]+)":"([^"]*)"/g)) {
      const parts = value!.split("…");
      const re = new RegExp(`"${esc(key!)}":"${parts.map(esc).join('[^"]*')}"`);
      if (!re.test(text)) return `no "${key}":"${value}" in ${text.slice(0, 300)}`;
    }
    return null;
  }
  const re = new RegExp(expected.split("…").map(esc).join("[\\s\\S]*"));
  return re.test(text) ? null : `"${expected}" not in ${text.slice(0, 300)}`;
}

/** The keys of the outermost object in a JSON-like text (which may hold `…`). */
function topLevelKeys(shown: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  for (let i = 0; i < shown.length; i++) {
    const c = shown[i];
    if (c === '"') {
      const end = shown.indexOf('"', i + 1);
      if (depth === 1 && shown[end + 1] === ":") keys.push(shown.slice(i + 1, end));
      i = end;
    } else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") depth--;
  }
  return keys;
}

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
