import { clipTokenizerJson } from "../clip-tokenizer-json.ts";

/**
 * Tokenizer files of the tiny model in the Hugging Face `tokenizer.json` format, as real FLUX
 * exports ship them: tokenizer/ a byte-level BPE CLIP tokenizer, tokenizer_2/ a Unigram T5 one.
 * Their vocabularies are tiny, so any text tokenizes (mostly one token per character).
 */
export type Files = Record<string, string>;

const json = (v: unknown) => `${JSON.stringify(v, null, 2)}\n`;

/** GPT-2/CLIP's byte -> printable character table. */
function bytesToUnicode(): string[] {
  const keep = new Set<number>();
  for (let b = 33; b <= 126; b++) keep.add(b);
  for (let b = 161; b <= 172; b++) keep.add(b);
  for (let b = 174; b <= 255; b++) keep.add(b);
  let extra = 0;
  return Array.from({ length: 256 }, (_, b) => String.fromCodePoint(keep.has(b) ? b : 256 + extra++));
}

const CLIP_MERGES: [string, string][] = [
  ["t", "h"],
  ["th", "e</w>"],
  ["a", "n"],
  ["i", "n"],
  ["o", "n</w>"],
];

export function clipTokenizerFiles(maxLength = 77): { files: Files; vocabSize: number } {
  const vocab: Record<string, number> = {};
  const add = (t: string) => (vocab[t] ??= Object.keys(vocab).length);
  const chars = bytesToUnicode();
  for (const c of chars) add(c);
  for (const c of chars) add(`${c}</w>`);
  for (const [a, b] of CLIP_MERGES) add(a + b);
  add("<|startoftext|>");
  add("<|endoftext|>"); // the largest id: the text encoder pools at the argmax id, as CLIP does
  const tokenizer = clipTokenizerJson(
    vocab,
    CLIP_MERGES.map(([a, b]) => `${a} ${b}`),
    "<|startoftext|>",
    "<|endoftext|>",
    "<|endoftext|>",
  );
  const specials = { bos_token: "<|startoftext|>", eos_token: "<|endoftext|>", pad_token: "<|endoftext|>", unk_token: "<|endoftext|>" };
  return {
    vocabSize: Object.keys(vocab).length,
    files: {
      "tokenizer.json": json(tokenizer),
      "tokenizer_config.json": json({
        tokenizer_class: "CLIPTokenizer",
        model_max_length: maxLength,
        do_lower_case: true,
        clean_up_tokenization_spaces: true,
        ...specials,
      }),
      "special_tokens_map.json": json(specials),
      "vocab.json": json(vocab),
      "merges.txt": `#version: 0.2\n${CLIP_MERGES.map(([a, b]) => `${a} ${b}`).join("\n")}\n`,
    },
  };
}

const T5_WORDS = ["a", "the", "of", "and", "in", "photo", "cat", "dog", "red", "blue", "sky", "at", "on", "with"];

export function t5TokenizerFiles(maxLength = 512): { files: Files; vocabSize: number } {
  const pieces: [string, number][] = [
    ["<pad>", 0],
    ["</s>", 0],
    ["<unk>", 0],
    ["▁", -2],
  ];
  for (const w of T5_WORDS) pieces.push([`▁${w}`, -3]);
  for (let c = 97; c <= 122; c++) pieces.push([`▁${String.fromCharCode(c)}`, -4]);
  for (let c = 33; c <= 126; c++) pieces.push([String.fromCharCode(c), -5]);
  const special = (id: number, content: string) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  const tokenizer = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [special(0, "<pad>"), special(1, "</s>"), special(2, "<unk>")],
    normalizer: { type: "Sequence", normalizers: [{ type: "Replace", pattern: { Regex: " {2,}" }, content: " " }] },
    pre_tokenizer: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
    post_processor: {
      type: "TemplateProcessing",
      single: [{ Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }],
      pair: [
        { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: "</s>", type_id: 0 } },
        { Sequence: { id: "B", type_id: 0 } },
        { SpecialToken: { id: "</s>", type_id: 0 } },
      ],
      special_tokens: { "</s>": { id: "</s>", ids: [1], tokens: ["</s>"] } },
    },
    decoder: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
    model: { type: "Unigram", unk_id: 2, vocab: pieces, byte_fallback: false },
  };
  const specials = { eos_token: "</s>", pad_token: "<pad>", unk_token: "<unk>" };
  return {
    vocabSize: pieces.length,
    files: {
      "tokenizer.json": json(tokenizer),
      "tokenizer_config.json": json({ tokenizer_class: "T5Tokenizer", model_max_length: maxLength, extra_ids: 0, ...specials }),
      "special_tokens_map.json": json(specials),
    },
  };
}
