// Writes docs/reference/cli.md from the commands' specs (runtime/cli/command-specs.ts), the same
// ones `--help` prints and the commands parse with. test/cli/help.test.ts checks it is current.
import { join } from "node:path";
import { cliReference } from "../runtime/cli/cli-reference.ts";

const out = join(import.meta.dir, "..", "docs", "reference", "cli.md");
await Bun.write(out, cliReference());
console.log(`wrote ${out}`);
