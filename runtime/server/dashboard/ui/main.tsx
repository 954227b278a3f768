import "uplot/dist/uPlot.min.css";
import "./style.css";
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { Api, ApiError, savedKey } from "./api.ts";
import { EventsHub } from "./events-hub.ts";
import { SignIn } from "./sign-in.tsx";
import { Overview } from "./overview.tsx";
import { EndpointJobs } from "./endpoint-jobs.tsx";
import { JobDetailView } from "./job-detail.tsx";
import { Playground } from "./playground.tsx";
import type { Session } from "./session.ts";

type Route =
  | { view: "overview" }
  | { view: "jobs"; ep: string }
  | { view: "job"; ep: string; id: string }
  | { view: "playground"; ep: string };

/** Views are chosen by the URL's fragment (#/endpoints/<id>/...), which never holds the key. */
function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "endpoints" && parts[1]) {
    if (parts[2] === "jobs" && parts[3]) return { view: "job", ep: parts[1], id: parts[3] };
    if (parts[2] === "playground") return { view: "playground", ep: parts[1] };
    return { view: "jobs", ep: parts[1] };
  }
  return { view: "overview" };
}

function App() {
  const [session, setSession] = useState<Session | null>(null);
  const [checking, setChecking] = useState(savedKey.get() !== null);
  const [error, setError] = useState<string | null>(null);
  const [route, setRoute] = useState(parseRoute(location.hash));
  const [live, setLive] = useState(false);

  useEffect(() => {
    const onHash = () => setRoute(parseRoute(location.hash));
    addEventListener("hashchange", onHash);
    return () => removeEventListener("hashchange", onHash);
  }, []);

  async function signIn(key: string): Promise<boolean> {
    const api = new Api(key);
    try {
      const { key: info, endpoints } = await api.endpoints();
      savedKey.set(key);
      const hub = new EventsHub(api);
      hub.onConnection = setLive;
      // A 401 is either a call out of the key's scope or a key revoked since sign-in: ask again.
      api.onUnauthorized = () => {
        fetch("/dashboard/api/endpoints", { headers: { authorization: `Bearer ${key}` } }).then(
          (res) => {
            if (res.status !== 401) return;
            hub.close();
            savedKey.clear();
            setSession(null);
            setError("Signed out: this API key is no longer valid (revoked?)");
          },
          () => {},
        );
      };
      setSession({ api, key: info, endpoints, hub, canAct: info.scope === "full" || info.scope === "client" });
      setError(null);
      return true;
    } catch (err) {
      savedKey.clear();
      setError(
        err instanceof ApiError && err.status === 401 ? `Sign-in refused: ${err.message}` : `Sign-in failed: ${(err as Error).message}`,
      );
      return false;
    }
  }

  useEffect(() => {
    const key = savedKey.get();
    if (key) void signIn(key).finally(() => setChecking(false));
  }, []);

  useEffect(() => {
    document.title = session ? `Spool dashboard · ${titleOf(route)}` : "Spool dashboard · sign in";
  }, [session, route]);

  function signOut() {
    session?.hub.close();
    savedKey.clear();
    setSession(null);
    location.hash = "";
  }

  if (!session) {
    return (
      <main>
        <h1>Spool dashboard</h1>
        {checking ? <p>Signing in…</p> : <SignIn onSubmit={signIn} error={error} />}
      </main>
    );
  }
  const endpoint = "ep" in route ? session.endpoints.find((e) => e.id === route.ep) : undefined;
  return (
    <>
      <header class="top">
        <a href="#/" class="brand">
          Spool
        </a>
        <nav aria-label="Endpoints">
          <ul>
            {session.endpoints.map((e) => (
              <li key={e.id}>
                <a href={`#/endpoints/${encodeURIComponent(e.id)}`} aria-current={"ep" in route && route.ep === e.id ? "page" : undefined}>
                  {e.id}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <span class="who">
          <span class={live ? "live on" : "live"} title={live ? "Live updates connected" : "Live updates reconnecting"}>
            {live ? "● live" : "○ reconnecting"}
          </span>{" "}
          {session.key.name} <span class="scope">({session.key.scope})</span>{" "}
          <button type="button" onClick={signOut}>
            Sign out
          </button>
        </span>
      </header>
      <main>
        {route.view === "overview" && <Overview session={session} />}
        {route.view !== "overview" && !endpoint && <p role="alert">No endpoint {route.ep} for this key.</p>}
        {endpoint && route.view === "jobs" && <EndpointJobs session={session} endpoint={endpoint} />}
        {endpoint && route.view === "job" && <JobDetailView session={session} endpoint={endpoint} id={route.id} />}
        {endpoint && route.view === "playground" && <Playground session={session} endpoint={endpoint} />}
      </main>
    </>
  );
}

function titleOf(route: Route): string {
  switch (route.view) {
    case "overview":
      return "endpoints";
    case "jobs":
      return `${route.ep} jobs`;
    case "job":
      return `job ${route.id}`;
    case "playground":
      return `${route.ep} playground`;
  }
}

const root = document.getElementById("app")!;
root.textContent = ""; // the loading line
render(<App />, root);
