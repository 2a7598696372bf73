/* Build helper: embed_source NAME FILE prints FILE as a C array
 *     static const char NAME[] = {..., 0};
 * so that a program can carry its own source text (examples/article.c's page). */
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: embed_source NAME FILE\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    printf("static const char %s[] = {", argv[1]);
    int c;
    long n = 0;
    while ((c = fgetc(f)) != EOF) printf("%s%d,", n++ % 24 ? "" : "\n", c);
    printf("\n0};\n");
    int bad = ferror(f);
    fclose(f);
    return bad || ferror(stdout) ? 1 : 0;
}
