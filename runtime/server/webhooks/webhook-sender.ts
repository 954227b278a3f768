import type { AppDeps } from "../app-deps.ts";
import { jobResponse } from "../job-view.ts";
import { topics } from "../store/store-events.ts";
import type { WebhookDelivery } from "../store/store.ts";
import { waitFor } from "../wait-for.ts";
import { resolvesPrivate } from "./webhook-address.ts";
import { signWebhook } from "./webhook-signature.ts";

/** The first attempt and exactly 2 more (the specification's retry rule). */
export const WEBHOOK_ATTEMPTS = 3;
const BATCH = 16;

/**
 * Delivers the webhook calls the store owes, apart from the job path: a slow receiver delays
 * nothing but its own call. Due calls are leased, so with several servers each goes out once.
 */
export function startWebhookSender(deps: AppDeps & { secret: string }): { stop: () => Promise<void> } {
  const { store, clock, config, log } = deps;
  const { webhookRetryDelayMs, webhookTimeoutMs, webhookBlockPrivate } = config.server;
  const stopped = new AbortController();
  const wake = { events: store.events, clock };

  async function attempt(d: WebhookDelivery): Promise<string | null> {
    if (webhookBlockPrivate && (await resolvesPrivate(d.url))) return "the URL resolves to a private address";
    const body = JSON.stringify(jobResponse(d.job));
    const headers = signWebhook(deps.secret, `msg_${d.id}`, Math.floor(clock.now() / 1000), body);
    try {
      const res = await fetch(d.url, {
        method: "POST",
        headers: { "content-type": "application/json", "user-agent": "spool-webhooks", ...headers },
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
    const problem = await attempt(d);
    if (problem === null) return store.deliveryDone(d.id);
    const attempts = d.attempts + 1;
    if (attempts >= WEBHOOK_ATTEMPTS || problem.includes("private address")) {
      log.warn("webhook given up", { jobId: d.job.id, attempts, problem });
      return store.deliveryDone(d.id);
    }
    log.info("webhook attempt failed; will retry", { jobId: d.job.id, attempts, problem });
    await store.deliveryRetry(d.id, clock.now() + webhookRetryDelayMs);
  }

  const loop = (async () => {
    while (!stopped.signal.aborted) {
      try {
        const due = await store.takeDueDeliveries(clock.now(), webhookTimeoutMs + 5_000, BATCH);
        if (due.length) {
          await Promise.all(due.map(deliver));
          continue;
        }
      } catch (err) {
        log.error("webhook sender failed", { error: String(err) });
      }
      // Sleep until a call is owed, or long enough to catch retries falling due.
      await waitFor(wake, topics.webhooks, Math.max(1, Math.min(1_000, webhookRetryDelayMs)), async () => null, stopped.signal);
    }
  })();

  return {
    stop: async () => {
      stopped.abort();
      await loop;
    },
  };
}
