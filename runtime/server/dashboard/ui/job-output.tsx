import { costOf, pretty, textOf } from "./format.ts";

/**
 * What a job produced, the way a person wants to see it: an image inline from image_url, text
 * as it streams in, anything else as formatted JSON.
 */
export function JobOutput(props: { output: unknown; chunks: Array<{ output: unknown }>; status: string | undefined; input?: unknown }) {
  const { output, chunks } = props;
  const image = imageUrl(output);
  const streamed = chunks.length ? textOf(chunks.map((c) => c.output)) : null;
  const finalText = output !== undefined ? textOf(output) : null;
  const input = (props.input ?? {}) as Record<string, unknown>;
  return (
    <div class="output">
      {image && (
        <figure>
          <img
            src={image}
            alt={typeof input.prompt === "string" ? `Generated image: ${input.prompt}` : "Generated image"}
            width={typeof input.width === "number" ? input.width : undefined}
            height={typeof input.height === "number" ? input.height : undefined}
            data-testid="output-image"
          />
          <figcaption>
            <a href={image} target="_blank" rel="noreferrer">
              Open the image
            </a>
          </figcaption>
        </figure>
      )}
      {!image && streamed !== null && (
        <div class="text-output" aria-live="polite" data-testid="output-text">
          {streamed}
          {props.status === "IN_PROGRESS" && (
            <span class="cursor" aria-hidden="true">
              ▍
            </span>
          )}
        </div>
      )}
      {!image && streamed === null && finalText !== null && (
        <div class="text-output" data-testid="output-text">
          {finalText}
        </div>
      )}
      {!image && streamed === null && chunks.length > 0 && !onlyTheOutput(chunks, output) && (
        <details open>
          <summary>Stream chunks ({chunks.length})</summary>
          <pre>{chunks.map((c) => JSON.stringify(c.output)).join("\n")}</pre>
        </details>
      )}
      {output !== undefined && (
        <details open={!image && finalText === null}>
          <summary>Output JSON</summary>
          <pre data-testid="output-json">{pretty(output)}</pre>
        </details>
      )}
    </div>
  );
}

/** The job's cost in US dollars, from its output or its last chunk. */
export function jobCost(output: unknown, chunks: Array<{ output: unknown }>): number | null {
  return costOf(output) ?? (chunks.length ? costOf(chunks[chunks.length - 1]) : null);
}

/** A job that did not stream has its output as its one chunk: not worth showing twice. */
function onlyTheOutput(chunks: Array<{ output: unknown }>, output: unknown): boolean {
  return chunks.length === 1 && output !== undefined && JSON.stringify(chunks[0]!.output) === JSON.stringify(output);
}

function imageUrl(output: unknown): string | null {
  if (!output || typeof output !== "object") return null;
  const url = (output as Record<string, unknown>).image_url;
  return typeof url === "string" && /^(https?:|data:image\/)/.test(url) ? url : null;
}
