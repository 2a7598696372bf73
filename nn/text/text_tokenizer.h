/* One interface for both tokenizers a model comes with: GPT-2's files
 * (tokenizer.h) or Hugging Face's tokenizer.json (byte-level BPE: Qwen3's,
 * Llama 3's), and the chat formats of the book's Qwen3 and Llama 3.2.
 *
 *     Python (Hugging Face tokenizers; the book)          C
 *     tok = Tokenizer.from_file("tokenizer.json")         TextTokenizer *tok = text_tokenizer_load(dir, err, sizeof err);
 *     tok.encode(text).ids                                Tensor *ids = text_tokenizer_encode(tok, text, len,
 *                                                                 TEXT_SPECIAL_IN_TEXT | TEXT_ADD_SPECIAL_TOKENS, err, sizeof err);
 *     tok.decode(ids, skip_special_tokens=False)          char *s = text_tokenizer_decode(tok, ids, n, false, &len, err, sizeof err);
 *     tok.get_vocab_size()                                text_tokenizer_n_vocab(tok)
 *     tok.token_to_id("<|im_end|>")                       text_tokenizer_token_to_id(tok, "<|im_end|>")   (-1: none)
 *     Qwen3Tokenizer(..., add_generation_prompt=True,     text_chat_options o = {.add_generation_prompt = true,
 *         add_thinking=True).encode(prompt)                       .add_thinking = true};
 *                                                         Tensor *ids = qwen3_chat_encode(tok, prompt, len, &o, err, sizeof err);
 *     ChatFormat(tokenizer).encode(prompt)                Tensor *ids = llama3_chat_encode(tok, prompt, len, NULL, err, sizeof err);
 *     (either, by the tokenizer's special tokens)         text_tokenizer_chat_encode(tok, prompt, len, &o, err, sizeof err)
 *
 * tokenizer.json: what is read, and what is refused (naming the file and the key):
 *   model            "type": "BPE", byte-level: vocab {token: id} (ids 0..n-1, tokens spelled with
 *                    GPT-2's 256 byte characters), merges as "a b" strings or as ["a", "b"] pairs,
 *                    highest priority first; ignore_merges; no dropout, byte_fallback, prefixes or suffixes
 *   added_tokens     {id, content, special, ...}: matched in the text before anything else, the longest
 *                    at the leftmost place, as Hugging Face does (lstrip, rstrip, single_word and
 *                    normalized=true with a normalizer are refused)
 *   normalizer       null or {"type": "NFC"} (Qwen3's)
 *   pre_tokenizer    Sequence [Split (Llama 3's or Qwen3's regex, "Isolated"), ByteLevel (use_regex
 *                    false)], or ByteLevel with GPT-2's regex (use_regex true, no prefix space)
 *   post_processor   null, ByteLevel, TemplateProcessing (its "single": special tokens around $A),
 *                    or a Sequence of these: TEXT_ADD_SPECIAL_TOKENS adds the template's tokens
 *   decoder          ByteLevel (or null)
 * The regexes are matched by code written for them (tokenizer.c: \p{L}, \p{N} and \s from the
 * Unicode tables, (?i) as Unicode's simple case folding); any other pattern is refused.
 *
 * Memory: a TextTokenizer is long-lived (text_tokenizer_free); the ids and text
 * it returns live in the arena. It caches words it has encoded: one thread at a
 * time. Bad files, text and ids never call the error handler: NULL with a
 * message in err. */
#ifndef ATTENTION_TEXT_TOKENIZER_H
#define ATTENTION_TEXT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"
#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TextTokenizer TextTokenizer;

/* path: a tokenizer.json file, or a directory with tokenizer.json (Hugging
 * Face's) or GPT-2's files (tokenizer_load's names), tokenizer.json first. */
TextTokenizer *text_tokenizer_load(const char *path, char *err, size_t errlen);
/* A tokenizer.json from memory (Tokenizer.from_str); name is what messages call it. */
TextTokenizer *text_tokenizer_from_json(const char *json, size_t len, const char *name, char *err, size_t errlen);
/* GPT-2's tokenizer behind this interface (takes it: text_tokenizer_free frees it). */
TextTokenizer *text_tokenizer_from_gpt2(Tokenizer *gpt2, char *err, size_t errlen);
void text_tokenizer_free(TextTokenizer *tok);

enum {
    /* special and added tokens written in the text are their ids (HF's encode; tiktoken's
     * allowed_special="all"); without it they are ordinary text (disallowed_special=()) */
    TEXT_SPECIAL_IN_TEXT = 1,
    /* the post-processor's tokens (Llama 3's <|begin_of_text|>): HF's add_special_tokens=True */
    TEXT_ADD_SPECIAL_TOKENS = 2,
};
/* (n,) int64 ids in the arena; NULL with a message for text that is not UTF-8. */
Tensor *text_tokenizer_encode(TextTokenizer *tok, const char *text, size_t len, int flags, char *err, size_t errlen);
/* The text of n ids, NUL-terminated, in the arena (*len bytes, if len): bytes
 * that do not form UTF-8 become U+FFFD, as Hugging Face's and tiktoken's decode;
 * skip_special_tokens drops the special tokens (HF's decode(..., skip_special_tokens=True)).
 * NULL with a message for an id out of range. */
char *text_tokenizer_decode(const TextTokenizer *tok, const int64_t *ids, int64_t n, bool skip_special_tokens,
                            size_t *len, char *err, size_t errlen);

int64_t text_tokenizer_n_vocab(const TextTokenizer *tok); /* get_vocab_size(with_added_tokens=True) */
/* An added token's id by its content ("<|im_end|>"), else the token of exactly
 * these bytes ("<|endoftext|>" in GPT-2); -1 if none. */
int64_t text_tokenizer_token_to_id(const TextTokenizer *tok, const char *token);
bool text_tokenizer_is_special(const TextTokenizer *tok, int64_t id); /* an added token marked "special" */
/* "gpt2" (GPT-2's files) or "tokenizer.json" */
const char *text_tokenizer_kind(const TextTokenizer *tok);
/* The BPE inside (its merges and token bytes, tokenizer.h), owned by tok. */
Tokenizer *text_tokenizer_bpe(TextTokenizer *tok);

/* ---- the chat formats ---- */
typedef struct {
    bool plain;                 /* Qwen3: encode(text, chat_wrapped=False): no chat template */
    bool add_generation_prompt; /* Qwen3: "<|im_start|>assistant\n" after the user's turn */
    bool add_thinking;          /* Qwen3, with the prompt: leave the thinking to the model (else an empty
                                   "<think>\n\n</think>\n\n" block) */
    const char *system;         /* Llama 3: the system message (NULL: "You are a helpful assistant.") */
} text_chat_options;

/* The book's Qwen3Tokenizer.encode(text) (pkg/llms_from_scratch/qwen3.py): a text that is
 * one special token (stripped) is that id; else it is wrapped as
 * "<|im_start|>user\n{text}<|im_end|>\n" (+ the generation prompt), split at
 * "<|...|>", "<think>" and "</think>", the specials among the parts becoming
 * their ids and each other part encoded alone. opts NULL: all false. */
Tensor *qwen3_chat_encode(TextTokenizer *tok, const char *text, size_t len, const text_chat_options *opts, char *err,
                          size_t errlen);
/* The Llama 3.2 notebook's ChatFormat.encode(user_message, system_message)
 * (ch05/07_gpt_to_llama): <|begin_of_text|>, then the system's and the
 * user's turns, each "<|start_header_id|>role<|end_header_id|>\n\n" + text +
 * <|eot_id|>, then the assistant's header. As the notebook's tiktoken
 * encode(), a special token written in a message is refused. */
Tensor *llama3_chat_encode(TextTokenizer *tok, const char *user, size_t len, const text_chat_options *opts, char *err,
                           size_t errlen);
/* The chat format of this tokenizer: Qwen3's if it has <|im_start|>, Llama 3's
 * if it has <|start_header_id|>; GPT-2's has none (an error). */
Tensor *text_tokenizer_chat_encode(TextTokenizer *tok, const char *user, size_t len, const text_chat_options *opts,
                                   char *err, size_t errlen);
/* "qwen3", "llama3" or NULL: which one text_tokenizer_chat_encode uses. */
const char *text_tokenizer_chat_format(const TextTokenizer *tok);

#ifdef __cplusplus
}
#endif

#endif
