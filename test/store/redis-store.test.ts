import { RedisStore } from "../../runtime/server/store/redis/redis-store.ts";
import { redisUrl } from "../helpers/redis-server.ts";
import { RETENTION, runStoreSuite } from "./store-suite.ts";

// Each test gets its own key prefix on one real redis-server.
runStoreSuite("redis", async () => RedisStore.connect(await redisUrl(), { retention: RETENTION }, `{t-${crypto.randomUUID().slice(0, 8)}}:`));
