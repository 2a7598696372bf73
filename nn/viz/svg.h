/* Private helpers of the picture writers (viz.h). */
#ifndef ATTENTION_SVG_H
#define ATTENTION_SVG_H

#include "viz.h"

#define SVG_FONT 12
#define SVG_CHAR_W 7.3 /* width of one column of the monospace font at SVG_FONT px */

void svg_begin(FILE *f, double w, double h);
void svg_end(FILE *f);
/* <text> at (x, y) with text-anchor `anchor` ("start", "middle", "end") and
 * extra attributes (or NULL); s escaped. */
void svg_text(FILE *f, double x, double y, const char *anchor, const char *extra, const char *s);
void svg_number(char *buf, size_t n, double v);

#endif
