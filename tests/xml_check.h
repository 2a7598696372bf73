#ifndef ATTENTION_XML_CHECK_H
#define ATTENTION_XML_CHECK_H
#include <stdbool.h>
#include <stddef.h>
/* true if text (NUL-terminated, len bytes before the NUL) is well-formed XML; else false and a message with the byte offset in err. */
bool xml_check(const char *text, size_t len, char *err, size_t errlen);
#endif
