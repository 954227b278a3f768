import type { Clock } from "../../clock.ts";
import type { Config } from "../../config/config.ts";
import type { Log } from "../../log.ts";
import { jobResponse } from "../jobs/job-view.ts";
import { topics } from "../store/store-events.ts";
import type { Store, WebhookDelivery } from "../store/store.ts";
import { pinnedRequest, systemResolver, webhookTarget, type Resolver } from "../jobs/webhook-address.ts";
import { signWebhook } from "./webhook-signature.ts";
import { tracing } from "../../telemetry/tracing.ts";

/** How a webhook attempt ended: delivered, failed and retried later, or failed for good. */
export type WebhookOutcome = "delivered" | "retried" | "given_up";

/** What the sender is built from. */
export interface WebhookSenderDeps {
  store: Store;
  config: Config;
  clock: Clock;
  log: Log;
  /** The key its calls are signed with. */
  secret: string;
  /** How webhook hosts are looked up before each call (the system's resolver by default). */
  resolver?: Resolver;
  /** Told how each attempt ended. */
  metrics?: { webhook(outcome: WebhookOutcome): void };
}

/** The first attempt and exactly 2 more (the specification's retry rule). */
export const WEBHOOK_ATTEMPTS = 3;
const POLL_MS = 1_000;
/** Calls in flight at once; a slow receiver holds one slot, not the sender. */
const MAX_IN_FLIGHT = 64;

/**
 * Delivers the webhook calls the store owes, apart from the job path: a slow receiver delays
 * nothing but its own call. Due calls are leased, so with several servers each goes out once.
 */
export function startWebhookSender(deps: WebhookSenderDeps): { stop: () => Promise<void> } {
  const { store, clock, config, log } = deps;
  const { webhookRetryDelayMs, webhookTimeoutMs, webhookBlockPrivate, webhookAllow } = config.server;
  const stopped = new AbortController();
  /** Earliest retry this sender scheduled: it sleeps no longer than that. */
  let nextRetryAt = Number.POSITIVE_INFINITY;
  // A persistent listener, so an announcement between a check and the sleep is not missed.
  let announced = false;
  let wake = new AbortController();
  const unlisten = store.events.on(topics.webhooks, () => {
    announced = true;
    wake.abort();
  });

  async function attempt(d: WebhookDelivery): Promise<string | null> {
    let url = d.url;
    let pinned: { host: string; serverName: string } | undefined;
    if (webhookBlockPrivate) {
      const target = await webhookTarget(d.url, webhookAllow, deps.resolver ?? systemResolver);
      if ("refused" in target) return target.refused.startsWith("cannot resolve") ? target.refused : `refused: ${target.refused}`;
      ({ url, ...pinned } = pinnedRequest(d.url, target.address));
    }
    const body = JSON.stringify(jobResponse(d.job));
    const headers = signWebhook(deps.secret, `msg_${d.id}`, Math.floor(clock.now() / 1000), body);
    try {
      const res = await fetch(url, {
        method: "POST",
        // Pinned: the address that was checked, with the name's Host and TLS name.
        ...(pinned ? { tls: { serverName: pinned.serverName } } : {}),
        headers: {
          "content-type": "application/json",
          "user-agent": "spool-webhooks",
          ...(pinned ? { host: pinned.host } : {}),
          ...headers,
        },
        body,
        redirect: "manual",
        signal: AbortSignal.timeout(webhookTimeoutMs),
      });
      await res.body?.cancel();
      return res.status === 200 ? null : `HTTP ${res.status}`;
    } catch (err) {
      return String((err as Error).message ?? err);
    }
  }

  async function deliver(d: WebhookDelivery): Promise<void> {
    const started = clock.now();
    const problem = await attempt(d);
    if (tracing && d.job.traceparent) {
      tracing.record(
        "spool.webhook",
        d.job.traceparent,
        started,
        clock.now(),
        { "spool.job.id": d.job.id, "spool.webhook.attempt": d.attempts + 1 },
        problem ?? undefined,
      );
    }
    if (problem === null) {
      await store.deliveryDone(d.id);
      deps.metrics?.webhook("delivered");
      log.info("webhook delivered", { jobId: d.job.id, attempts: d.attempts + 1 });
      return;
    }
    const attempts = d.attempts + 1;
    if (attempts >= WEBHOOK_ATTEMPTS || problem.startsWith("refused: ")) {
      log.warn("webhook given up", { jobId: d.job.id, attempts, problem });
      deps.metrics?.webhook("given_up");
      return store.deliveryDone(d.id);
    }
    log.info("webhook attempt failed; will retry", { jobId: d.job.id, attempts, problem });
    deps.metrics?.webhook("retried");
    const at = clock.now() + webhookRetryDelayMs;
    nextRetryAt = Math.min(nextRetryAt, at);
    await store.deliveryRetry(d.id, at);
  }

  const inFlight = new Set<Promise<void>>();

  const loop = (async () => {
    while (!stopped.signal.aborted) {
      announced = false;
      if (nextRetryAt <= clock.now()) nextRetryAt = Number.POSITIVE_INFINITY;
      try {
        const free = MAX_IN_FLIGHT - inFlight.size;
        const due = free > 0 ? await store.takeDueDeliveries(clock.now(), webhookTimeoutMs + 5_000, free) : [];
        for (const d of due) {
          const p = deliver(d)
            .catch((err) => log.error("webhook delivery failed", { jobId: d.job.id, error: String(err) }))
            .finally(() => inFlight.delete(p));
          inFlight.add(p);
        }
        if (due.length === free && free > 0) continue;
      } catch (err) {
        log.error("webhook sender failed", { error: String(err) });
      }
      if (announced) continue;
      // Sleep until a call is announced or a retry falls due; polling at least every second
      // also catches retries scheduled by other servers sharing the store.
      wake = new AbortController();
      const sleepMs = Math.max(1, Math.min(POLL_MS, nextRetryAt - clock.now()));
      await clock.sleep(sleepMs, AbortSignal.any([wake.signal, stopped.signal]));
    }
  })();

  return {
    stop: async () => {
      stopped.abort();
      await loop;
      unlisten();
      await Promise.all(inFlight);
    },
  };
}
