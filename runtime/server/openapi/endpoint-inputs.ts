import type { z } from "zod";
import type { Config } from "../../config/config.ts";
import type { InputSchemas } from "../jobs/input-schemas.ts";
import { jsonSchema } from "./openapi-common.ts";

/** A JSON Schema object as z.toJSONSchema writes it. */
export type JsonSchema = Record<string, unknown>;

/** What the document knows of one endpoint's input. */
export interface EndpointInput {
  endpointId: string;
  /** JSON Schema of `input`, from the handler's zod schema; null when the server cannot read it. */
  input: JsonSchema | null;
}

/** The handler's zod schema as JSON Schema (input side), or null when it cannot be written as one. */
function toJsonSchema(schema: z.ZodType, componentName: string): JsonSchema | null {
  try {
    const json = jsonSchema(schema, "input");
    // Embedded under components, a reference to the schema's own root or $defs must say where it now lives.
    const text = JSON.stringify(json).replaceAll('"$ref":"#', `"$ref":"#/components/schemas/${componentName}`);
    return JSON.parse(text) as JsonSchema;
  } catch {
    return null;
  }
}

/** The component name of an endpoint's input schema. */
export const inputComponent = (endpointId: string) => `${endpointId}.input`;

/** Each configured endpoint's input schema, read from its handler (the same schema /run validates with). */
export async function endpointInputs(config: Config, inputSchemas: InputSchemas | undefined): Promise<EndpointInput[]> {
  const out: EndpointInput[] = [];
  for (const endpointId of Object.keys(config.endpoints)) {
    const schema = await inputSchemas?.get(endpointId);
    out.push({
      endpointId,
      input: schema ? toJsonSchema(schema, inputComponent(endpointId)) : null,
    });
  }
  return out;
}
