/**
 * JSON text a job's large field was read from, kept beside the parsed value so that an answer
 * can carry the text as it is instead of parsing it and writing it again (a status poll of a
 * 1 MB result, a job-take of a 1 MB input). Only fields of at least RAW_JSON_CHARS are kept
 * this way: a small one is parsed at once, which costs less than the bookkeeping.
 */
export const RAW_JSON_CHARS = 4096;

const texts = new WeakMap<object, Map<string, () => string>>();

/**
 * Defines `obj[field]` as the value of the JSON `text` (read on first use, once), parsed on
 * first read. Assigning the field replaces the value and forgets the text. A value read and
 * then changed in place, or a field deleted, would leave the text behind: a job read from a
 * store is never changed those ways.
 */
export function lazyJson(obj: object, field: string, text: () => string): void {
  let source: string | undefined;
  const read = () => (source ??= text());
  let parsed: unknown;
  let done = false;
  let fields = texts.get(obj);
  if (!fields) texts.set(obj, (fields = new Map()));
  fields.set(field, read);
  Object.defineProperty(obj, field, {
    enumerable: true,
    configurable: true,
    get: () => {
      if (!done) [parsed, done] = [JSON.parse(read()), true];
      return parsed;
    },
    set: (value: unknown) => {
      Object.defineProperty(obj, field, { value, writable: true, enumerable: true, configurable: true });
      fields.delete(field);
    },
  });
}

/**
 * Sets `obj[field]` to the value of the JSON `text` (undefined when there is none): parsed now
 * when short, through lazyJson when RAW_JSON_CHARS or longer.
 */
export function setJson(obj: object, field: string, text: string | null | undefined): void {
  if (text !== null && text !== undefined && text.length >= RAW_JSON_CHARS) lazyJson(obj, field, () => text);
  else (obj as Record<string, unknown>)[field] = text === null || text === undefined ? undefined : JSON.parse(text);
}

/** The JSON text of `obj[field]` when it was defined by lazyJson and not assigned since. */
export function rawJson(obj: object, field: string): string | undefined {
  return texts.get(obj)?.get(field)?.();
}

/** JSON.stringify of `body` with `field` (written last) given as JSON text. */
export function stringifyWith(body: Record<string, unknown>, field: string, text: string): string {
  const { [field]: _, ...rest } = body;
  return appendField(JSON.stringify(rest), field, text);
}

/**
 * JSON.stringify of `obj` less its field `omit` (never read), a field defined by lazyJson written
 * as the text it was read from (written last; not parsed for this).
 */
export function stringifyWithout(obj: object, omit: string): string {
  const fields = texts.get(obj);
  const copy: Record<string, unknown> = {};
  const raw: [string, string][] = [];
  for (const k of Object.keys(obj)) {
    if (k === omit) continue;
    const text = fields?.get(k)?.();
    if (text !== undefined) raw.push([k, text]);
    else copy[k] = (obj as Record<string, unknown>)[k];
  }
  return raw.reduce((json, [k, text]) => appendField(json, k, text), JSON.stringify(copy));
}

/** An object's JSON with one more field, given as JSON text. */
const appendField = (json: string, field: string, text: string) =>
  `${json.slice(0, -1)}${json.length > 2 ? "," : ""}${JSON.stringify(field)}:${text}}`;
