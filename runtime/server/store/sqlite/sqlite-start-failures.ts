import { topics } from "../store-events.ts";
import type { StartFailure, StartFailureRun } from "../store.ts";
import type { Announce, SqliteContext } from "./sqlite-context.ts";

interface RunRow {
  endpoint: string;
  attempts: number;
  first_at: number;
  permanent: number;
  last: string;
}

const toRun = (r: RunRow): StartFailureRun => ({
  attempts: r.attempts,
  firstAt: r.first_at,
  permanent: r.permanent === 1,
  last: JSON.parse(r.last),
});

/** Runs of failed worker starts on the embedded store; the writes run inside the store's transaction. */
export const startFailures = {
  add(s: SqliteContext, endpointId: string, failure: StartFailure, announce: Announce): StartFailureRun {
    const row = s.db
      .query<RunRow, [string, number, number, string]>(
        `INSERT INTO start_failures (endpoint, attempts, first_at, permanent, last) VALUES (?1, 1, ?2, ?3, ?4)
         ON CONFLICT (endpoint) DO UPDATE SET attempts = attempts + 1, permanent = MAX(permanent, ?3), last = ?4
         RETURNING *`,
      )
      .get(endpointId, failure.at, failure.permanent ? 1 : 0, JSON.stringify(failure))!;
    announce(topics.startFailures);
    return toRun(row);
  },

  all(s: SqliteContext): Record<string, StartFailureRun> {
    const rows = s.db.query<RunRow, []>("SELECT * FROM start_failures").all();
    return Object.fromEntries(rows.map((r) => [r.endpoint, toRun(r)]));
  },

  end(s: SqliteContext, endpointId: string, announce: Announce): void {
    if (s.db.query("DELETE FROM start_failures WHERE endpoint = ?").run(endpointId).changes) announce(topics.startFailures);
  },
};
