import { useEffect, useState } from "preact/hooks";
import type { EndpointInfo } from "./api.ts";
import type { Session } from "./session.ts";
import { CancelButton } from "./actions.tsx";
import { ms, pretty } from "./format.ts";
import { JobOutput, jobCost } from "./job-output.tsx";
import { useJobStream } from "./job-stream.ts";
import { formable, initialValues, SchemaFields, toInput, type FormValues } from "./schema-form.tsx";

/**
 * Try an endpoint: a form generated from its input schema (a JSON editor when the server cannot
 * read the schema, or asks for it), then the job as it arrives, with its cost and timings.
 */
export function Playground({ session, endpoint }: { session: Session; endpoint: EndpointInfo }) {
  const ep = endpoint.id;
  const schema = endpoint.inputSchema;
  const hasForm = formable(schema);
  const [asJson, setAsJson] = useState(!hasForm);
  const [values, setValues] = useState<FormValues>(hasForm ? initialValues(schema) : {});
  const [json, setJson] = useState(() => pretty(schema?.examples?.[0] ?? {}));
  const [error, setError] = useState<string | null>(null);
  const [jobId, setJobId] = useState<string | null>(null);
  const [submitted, setSubmitted] = useState<Record<string, unknown> | null>(null);
  const [busy, setBusy] = useState(false);
  const live = useJobStream(session.api, ep, jobId);

  useEffect(() => {
    setAsJson(!hasForm);
    setValues(hasForm ? initialValues(schema) : {});
    setJson(pretty(schema?.examples?.[0] ?? {}));
    setJobId(null);
  }, [ep]);

  function currentInput(): Record<string, unknown> {
    if (!asJson && hasForm) return toInput(schema, values);
    const parsed = JSON.parse(json);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error("the input must be a JSON object");
    return parsed;
  }

  function switchMode() {
    try {
      if (!asJson && hasForm) setJson(pretty(toInput(schema, values)));
      setAsJson(!asJson);
      setError(null);
    } catch (err) {
      setError((err as Error).message);
    }
  }

  async function submit(e: Event) {
    e.preventDefault();
    setError(null);
    let input: Record<string, unknown>;
    try {
      input = currentInput();
    } catch (err) {
      setError(`Input: ${(err as Error).message}`);
      return;
    }
    setBusy(true);
    try {
      const { id } = await session.api.run(ep, input);
      setSubmitted(input);
      setJobId(id);
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  }

  const status = live.status;
  const output = status?.status === "COMPLETED" ? status.output : undefined;
  const cost = jobCost(output, live.chunks);
  return (
    <>
      <h1>
        {ep} <span class="muted">playground</span>
      </h1>
      <div class="playground">
        <form class="run-form" onSubmit={submit} aria-labelledby="pg-input-h">
          <h2 id="pg-input-h">Input</h2>
          {!hasForm && (
            <p class="muted">
              {schema
                ? "This endpoint's input is not a plain list of fields: write it as JSON (the example comes from its handler)."
                : "The server cannot read this endpoint's input schema (a built binary, or no handler): write the input as JSON."}
              {schema?.description && (
                <>
                  <br />
                  {schema.description}
                </>
              )}
            </p>
          )}
          {asJson || !hasForm ? (
            <div class="field">
              <label for="pg-json">Input JSON</label>
              <textarea
                id="pg-json"
                class="mono"
                rows={14}
                value={json}
                onInput={(e) => setJson(e.currentTarget.value)}
                spellcheck={false}
              />
            </div>
          ) : (
            <SchemaFields schema={schema} values={values} onChange={setValues} idPrefix="pg" />
          )}
          <p class="actions">
            <button
              type="submit"
              class="primary"
              disabled={busy || !session.canAct}
              title={session.canAct ? undefined : "This key is read-only: it may not run jobs"}
            >
              Run
            </button>
            {hasForm && (
              <button type="button" onClick={switchMode}>
                {asJson ? "Edit as form" : "Edit as JSON"}
              </button>
            )}
          </p>
          {error && (
            <p role="alert" class="error">
              {error}
            </p>
          )}
        </form>
        <section class="run-result" aria-labelledby="pg-result-h">
          <h2 id="pg-result-h">Result</h2>
          {!jobId && <p class="muted">Run a job to see its output here as it arrives.</p>}
          {jobId && (
            <>
              <p>
                Job{" "}
                <a class="mono" href={`#/endpoints/${encodeURIComponent(ep)}/jobs/${encodeURIComponent(jobId)}`}>
                  {jobId}
                </a>{" "}
                <span class={`status s-${status?.status ?? "IN_QUEUE"}`} data-testid="run-status" role="status">
                  {status?.status ?? "submitted"}
                </span>{" "}
                {status?.status === "IN_QUEUE" && status.queuePosition !== undefined && (
                  <span class="muted">{status.queuePosition} ahead in the queue </span>
                )}
                {!live.ended && <CancelButton session={session} ep={ep} id={jobId} status={status?.status ?? "IN_QUEUE"} />}
              </p>
              <dl class="facts compact">
                <dt>Delay</dt>
                <dd data-testid="run-delay">{ms(status?.delayTime)}</dd>
                <dt>Execution</dt>
                <dd data-testid="run-execution">{ms(status?.executionTime)}</dd>
                <dt>Cost</dt>
                <dd data-testid="run-cost">{cost === null ? "–" : `$${cost.toFixed(10).replace(/0+$/, "").replace(/\.$/, "")}`}</dd>
              </dl>
              {status?.status === "IN_PROGRESS" && status.output !== undefined && live.chunks.length === 0 && (
                <p class="muted">Progress: {typeof status.output === "object" ? JSON.stringify(status.output) : String(status.output)}</p>
              )}
              {status?.error !== undefined && (
                <pre class="error">{typeof status.error === "string" ? status.error : pretty(status.error)}</pre>
              )}
              {live.error && (
                <p role="alert" class="error">
                  {live.error}
                </p>
              )}
              <JobOutput output={output} chunks={live.chunks} status={status?.status} input={submitted ?? undefined} />
            </>
          )}
        </section>
      </div>
    </>
  );
}
