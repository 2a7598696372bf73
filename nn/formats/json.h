/* JSON as Python's json module reads and writes it: a reader with its rules
 * and its error messages, and a writer whose output is json.dump's byte for
 * byte (chapter 7 reads its instruction data and writes the test set back with
 * each "model_response"):
 *
 *     Python                                              C
 *     with open(path, encoding="utf-8") as f:             JsonValue *data = json_load(path, err, sizeof err);
 *         data = json.load(f)
 *     data = json.loads(text)                             JsonValue *data = json_loads(text, len, err, sizeof err);
 *     len(data), data[i]                                  json_len(data), json_at(data, i)
 *     entry["output"], "k" in entry                       json_get(entry, "output") (NULL: absent)
 *     isinstance(v, str), v                               v->type == JSON_STRING, v->str (v->len bytes)
 *     entry["model_response"] = text                      json_set_string(entry, "model_response", text, len)
 *     obj[key] = value, lst.append(value)                 json_set(obj, key, value), json_append(lst, value)
 *     json.dumps(obj, indent=4)                           char *s = json_dumps(obj, 4, &len, err, sizeof err)
 *     json.dumps(obj)  (indent=None)                      json_dumps(obj, -1, &len, err, sizeof err)
 *     with open(path, "w") as f:                          json_dump(obj, path, 4, err, sizeof err)
 *         json.dump(obj, f, indent=4)
 *
 * Reading, as json.load of a file opened with encoding="utf-8": the bytes must
 * be UTF-8 (else Python's UnicodeDecodeError text: "'utf-8' codec can't decode
 * byte 0xff in position 7: invalid start byte"); then Python's grammar and
 * messages, with its line and column ("Expecting ',' delimiter: line 3 column
 * 5 (char 20)"; columns and chars count characters, not bytes, and in a file
 * CR LF counts as one, as text mode reads it). As Python: NaN, Infinity and
 * -Infinity are numbers; raw control characters in strings are refused; a key
 * given twice keeps its first place and its last value; "\uXXXX" pairs of
 * surrogates join into one character, and a lone surrogate is kept (as WTF-8,
 * the 3-byte form; such a string is not valid UTF-8, as Python's str cannot be
 * encoded, and it is written back as the same "\udXXX"); an integer of more
 * than 4300 digits is refused with Python's ValueError text. Nesting deeper
 * than JSON_MAX_DEPTH levels is refused (Python gives up near 1000 with a
 * RecursionError). A leading UTF-8 BOM is Python's "Unexpected UTF-8 BOM".
 *
 * Writing, as json.dump(obj, f, indent=4) (ensure_ascii=True): non-ASCII as
 * \uXXXX in lowercase hex (above U+FFFF as a surrogate pair), the escapes \"
 * \\ \n \r \t \b \f, other characters below 0x20 and 0x7f as \u00XX; items
 * one a line, indented, "," at line ends, ": " after keys; [] and {} when
 * empty; keys in insertion order; numbers as Python prints an int or a float
 * (repr: 100.0, 1e-05, NaN, Infinity); no newline at the end.
 *
 * Memory: a JsonValue tree is malloc'd and long-lived; json_free(root) frees
 * it whole. json_append/json_set take the value they are given (it becomes
 * part of the tree: never give one value to two places, nor free it
 * yourself). json_dumps returns a malloc'd string the caller frees. Bad input
 * never calls the error handler: the readers return NULL with a message in
 * err. The builders allocate with ac_malloc (out of memory is the library's
 * error). */
#ifndef ATTENTION_JSON_H
#define ATTENTION_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define JSON_MAX_DEPTH 1000

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonType;

typedef struct JsonValue JsonValue;
typedef struct {
    char *key;        /* UTF-8, NUL-terminated (may hold NULs: key_len says how long) */
    size_t key_len;
    JsonValue *value;
} JsonMember;

struct JsonValue {
    JsonType type;
    bool boolean;          /* JSON_BOOL */
    bool is_int;           /* JSON_NUMBER: a Python int (no fraction, no exponent) */
    double number;         /* JSON_NUMBER: its value (an int's rounded to double) */
    char *str;             /* JSON_STRING: UTF-8, NUL-terminated; JSON_NUMBER int: its digits, as Python prints them */
    size_t len;            /* bytes of str */
    size_t n, cap;         /* JSON_ARRAY: items; JSON_OBJECT: members */
    JsonValue **items;     /* JSON_ARRAY */
    JsonMember *members;   /* JSON_OBJECT, in insertion order */
};

/* Parse text (len bytes; NUL not needed) as json.loads(text.decode("utf-8")). */
JsonValue *json_loads(const char *text, size_t len, char *err, size_t errlen);
/* Read a file as json.load(open(path, encoding="utf-8")); messages start "PATH: ". */
JsonValue *json_load(const char *path, char *err, size_t errlen);
void json_free(JsonValue *v); /* the whole tree; NULL is fine */

/* indent >= 0: json.dumps(v, indent=indent); indent < 0: json.dumps(v) (", " and ": ").
 * NULL with a message for a string that is not UTF-8 (nor WTF-8), or a tree deeper than
 * JSON_MAX_DEPTH. *len (if len) is the length; the string is NUL-terminated. */
char *json_dumps(const JsonValue *v, int indent, size_t *len, char *err, size_t errlen);
/* The same written to path: to PATH.tmp first, then renamed over PATH (never half written). */
bool json_dump(const JsonValue *v, const char *path, int indent, char *err, size_t errlen);

/* Reading a tree. */
size_t json_len(const JsonValue *v);                        /* items or members; 0 for others */
JsonValue *json_at(const JsonValue *v, size_t i);           /* an array's item i; NULL if out of range */
JsonValue *json_get(const JsonValue *obj, const char *key); /* NULL if absent or obj is not an object */
const char *json_type_name(JsonType t);                     /* Python's: "list", "dict", "str", "int", ... */
const char *json_value_type_name(const JsonValue *v);       /* the same, "float" for a non-int number */

/* Building a tree. */
JsonValue *json_new_null(void);
JsonValue *json_new_bool(bool b);
JsonValue *json_new_int(int64_t i);
JsonValue *json_new_float(double d);
JsonValue *json_new_string(const char *s, size_t len); /* copied */
JsonValue *json_new_array(void);
JsonValue *json_new_object(void);
void json_append(JsonValue *array, JsonValue *item);                    /* lst.append(item): takes item */
void json_set(JsonValue *obj, const char *key, JsonValue *value);      /* obj[key] = value: takes value; a key
                                                                           present keeps its place */
void json_set_string(JsonValue *obj, const char *key, const char *s, size_t len); /* obj[key] = s (copied) */
JsonValue *json_copy(const JsonValue *v);                               /* a deep copy */

#ifdef __cplusplus
}
#endif

#endif
