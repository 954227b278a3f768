import { SqliteStore } from "../../runtime/server/store/sqlite-store.ts";
import { RETENTION, runStoreSuite } from "./store-suite.ts";

runStoreSuite("sqlite", async () => SqliteStore.open(":memory:", { retention: RETENTION }));
