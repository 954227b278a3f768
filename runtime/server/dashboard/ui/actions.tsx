import { useState } from "preact/hooks";
import type { Session } from "./session.ts";

const READ_ONLY = "This key is read-only: it may look, not change anything";

/** A button for a change (cancel, retry, purge): disabled for a read-only key, reports its answer. */
export function ActionButton(props: {
  session: Session;
  label: string;
  confirm?: string;
  run: () => Promise<string>;
  disabled?: boolean;
  class?: string;
}) {
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<{ text: string; error: boolean } | null>(null);
  const blocked = !props.session.canAct;
  return (
    <span class="action">
      <button
        type="button"
        class={props.class}
        disabled={blocked || busy || props.disabled}
        title={blocked ? READ_ONLY : undefined}
        onClick={async () => {
          if (props.confirm && !confirm(props.confirm)) return;
          setBusy(true);
          try {
            setMessage({ text: await props.run(), error: false });
          } catch (err) {
            setMessage({ text: (err as Error).message, error: true });
          } finally {
            setBusy(false);
          }
        }}
      >
        {props.label}
      </button>
      {message && (
        <span role="status" class={message.error ? "error" : "muted"}>
          {" "}
          {message.text}
        </span>
      )}
    </span>
  );
}

export function PurgeButton({ session, ep }: { session: Session; ep: string }) {
  return (
    <ActionButton
      session={session}
      label="Purge queue"
      class="danger"
      confirm={`Remove every queued job of ${ep}? Running jobs go on.`}
      run={async () => `removed ${(await session.api.purge(ep)).removed}`}
    />
  );
}

export function CancelButton({ session, ep, id, status }: { session: Session; ep: string; id: string; status: string }) {
  return (
    <ActionButton
      session={session}
      label="Cancel"
      disabled={status !== "IN_QUEUE" && status !== "IN_PROGRESS"}
      run={async () => (await session.api.cancel(ep, id)).status}
    />
  );
}

export function RetryButton({ session, ep, id, status }: { session: Session; ep: string; id: string; status: string }) {
  return (
    <ActionButton
      session={session}
      label="Retry"
      disabled={status !== "FAILED" && status !== "TIMED_OUT"}
      run={async () => (await session.api.retry(ep, id)).status}
    />
  );
}
