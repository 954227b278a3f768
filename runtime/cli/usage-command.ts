import { loadConfig } from "../config/config.ts";
import { openStore } from "./open-store.ts";

/** `spool usage [--data DIR] [--config FILE]`: jobs charged and cost per API key and endpoint. */
export async function usageCommand(flags: { data?: string; config?: string; store?: string }): Promise<number> {
  // Only the store matters here: no GPU lookup, and a GPU endpoint is no error on this machine.
  const config = await loadConfig(flags.config, { serving: false });
  if (flags.data !== undefined) config.server.data = flags.data;
  if (flags.store !== undefined) config.server.store = flags.store;
  const store = await openStore(config);
  try {
    const names = new Map((await store.listKeys()).map((k) => [k.id, k.name]));
    const rows = await store.usage();
    console.log("key\tname\tendpoint\tjobs\tcost_usd");
    for (const r of rows) console.log(`${r.keyId}\t${names.get(r.keyId) ?? "?"}\t${r.endpointId}\t${r.jobs}\t${r.cost.toFixed(10)}`);
    const total = rows.reduce((a, r) => a + Math.round(r.cost * 1e10), 0) / 1e10;
    console.log(`total\t\t\t${rows.reduce((a, r) => a + r.jobs, 0)}\t${total.toFixed(10)}`);
    return 0;
  } finally {
    await store.close();
  }
}
