import type { JSX } from "preact";
import type { JsonSchema } from "./api.ts";

/** The value of each field as typed (strings, booleans), keyed by property name. */
export type FormValues = Record<string, string | boolean>;

const typeOf = (s: JsonSchema): string | undefined => (Array.isArray(s.type) ? s.type.find((t) => t !== "null") : s.type);

/** Whether a schema can be shown as a form: an object with named properties. */
export function formable(schema: JsonSchema | null): schema is JsonSchema & { properties: Record<string, JsonSchema> } {
  return !!schema && typeOf(schema) === "object" && !!schema.properties && Object.keys(schema.properties).length > 0;
}

/** Scalars get an input; objects, arrays and anything else get a JSON field. */
function kind(s: JsonSchema): "enum" | "number" | "integer" | "boolean" | "string" | "json" {
  if (s.enum?.every((v) => typeof v === "string" || typeof v === "number")) return "enum";
  const t = typeOf(s);
  if (t === "number" || t === "integer" || t === "boolean" || t === "string") return t;
  return "json";
}

/** The form's starting values: each field's default, else empty. */
export function initialValues(schema: JsonSchema & { properties: Record<string, JsonSchema> }): FormValues {
  const values: FormValues = {};
  for (const [name, s] of Object.entries(schema.properties)) {
    const k = kind(s);
    if (k === "boolean") values[name] = s.default === true;
    else if (s.default === undefined) values[name] = "";
    else values[name] = k === "json" ? JSON.stringify(s.default) : String(s.default);
  }
  return values;
}

/** Turns the typed values into the job input; throws an Error naming the field on bad JSON or numbers. */
export function toInput(schema: JsonSchema & { properties: Record<string, JsonSchema> }, values: FormValues): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  for (const [name, s] of Object.entries(schema.properties)) {
    const v = values[name];
    const k = kind(s);
    if (k === "boolean") {
      input[name] = v === true;
      continue;
    }
    if (typeof v !== "string" || v.trim() === "") continue;
    if (k === "number" || k === "integer") {
      const n = Number(v);
      if (!Number.isFinite(n)) throw new Error(`${name}: not a number`);
      input[name] = n;
    } else if (k === "enum") input[name] = s.enum!.find((e) => String(e) === v) ?? v;
    else if (k === "json") {
      try {
        input[name] = JSON.parse(v);
      } catch {
        throw new Error(`${name}: not valid JSON`);
      }
    } else input[name] = v;
  }
  return input;
}

function hint(s: JsonSchema): string {
  const parts: string[] = [];
  const min = s.minimum ?? s.exclusiveMinimum;
  const max = s.maximum ?? s.exclusiveMaximum;
  const shown = (n: number | undefined) => n !== undefined && Math.abs(n) < 1e12;
  if (shown(min) && shown(max)) parts.push(`${min}–${max}`);
  else if (shown(min)) parts.push(`at least ${min}`);
  else if (shown(max)) parts.push(`at most ${max}`);
  if (s.multipleOf) parts.push(`a multiple of ${s.multipleOf}`);
  if (s.default !== undefined) parts.push(`default ${JSON.stringify(s.default)}`);
  if (s.enum) parts.push(`one of ${s.enum.map((e) => JSON.stringify(e)).join(", ")}`);
  if (kind(s) === "json") parts.push("JSON");
  return [s.description, parts.join(", ")].filter(Boolean).join(" · ");
}

/** Inputs generated from a JSON schema, with labels, ranges, defaults and enums shown. */
export function SchemaFields(props: {
  schema: JsonSchema & { properties: Record<string, JsonSchema> };
  values: FormValues;
  onChange: (values: FormValues) => void;
  idPrefix: string;
}) {
  const { schema, values, idPrefix } = props;
  const required = new Set(schema.required ?? []);
  const set = (name: string, value: string | boolean) => props.onChange({ ...values, [name]: value });
  return (
    <>
      {Object.entries(schema.properties).map(([name, s]) => {
        const id = `${idPrefix}-${name}`;
        const help = hint(s);
        const k = kind(s);
        const common = { id, name, "aria-describedby": help ? `${id}-hint` : undefined, required: required.has(name) && k !== "boolean" };
        const value = values[name];
        let control: JSX.Element;
        if (k === "boolean")
          control = <input {...common} type="checkbox" checked={value === true} onChange={(e) => set(name, e.currentTarget.checked)} />;
        else if (k === "enum") {
          control = (
            <select {...common} value={String(value)} onChange={(e) => set(name, e.currentTarget.value)}>
              {!required.has(name) && s.default === undefined && <option value="">(none)</option>}
              {s.enum!.map((v) => (
                <option key={String(v)} value={String(v)}>
                  {String(v)}
                </option>
              ))}
            </select>
          );
        } else if (k === "number" || k === "integer") {
          const lim = (n: number | undefined) => (n !== undefined && Math.abs(n) < 1e15 ? n : undefined);
          control = (
            <input
              {...common}
              type="number"
              inputMode={k === "integer" ? "numeric" : "decimal"}
              min={lim(s.minimum)}
              max={lim(s.maximum)}
              step={s.multipleOf ?? (k === "integer" ? 1 : "any")}
              value={String(value)}
              onInput={(e) => set(name, e.currentTarget.value)}
            />
          );
        } else if (k === "string" && !/prompt|text|content/i.test(name)) {
          control = (
            <input
              {...common}
              type="text"
              value={String(value)}
              minLength={s.minLength}
              maxLength={s.maxLength}
              onInput={(e) => set(name, e.currentTarget.value)}
            />
          );
        } else {
          control = (
            <textarea
              {...common}
              rows={k === "json" ? 4 : 3}
              class={k === "json" ? "mono" : undefined}
              value={String(value)}
              onInput={(e) => set(name, e.currentTarget.value)}
            />
          );
        }
        return (
          <div class={`field field-${k}`} key={name}>
            <label for={id} class={required.has(name) ? "required" : undefined}>
              {name}
            </label>
            {control}
            {help && <small id={`${id}-hint`}>{help}</small>}
          </div>
        );
      })}
    </>
  );
}
