/** The tokenizer.json that transformers' CLIPTokenizerFast writes, for this vocabulary and merges. */
export function clipTokenizerJson(vocab: Record<string, number>, merges: string[], bos: string, eos: string, unk: string) {
  const special = (content: string) => ({
    id: vocab[content],
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: true,
    special: true,
  });
  if (vocab[bos] === undefined || vocab[eos] === undefined) throw new Error(`CLIP vocab.json lacks ${bos} or ${eos}`);
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [special(bos), special(eos)],
    normalizer: {
      type: "Sequence",
      normalizers: [{ type: "NFC" }, { type: "Replace", pattern: { Regex: "\\s+" }, content: " " }, { type: "Lowercase" }],
    },
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        {
          type: "Split",
          pattern: { Regex: "<\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+" },
          behavior: "Removed",
          invert: true,
        },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: {
      type: "RobertaProcessing",
      sep: [eos, vocab[eos]],
      cls: [bos, vocab[bos]],
      trim_offsets: false,
      add_prefix_space: false,
    },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: unk,
      continuing_subword_prefix: "",
      end_of_word_suffix: "</w>",
      fuse_unk: false,
      byte_fallback: false,
      vocab,
      merges,
    },
  };
}
