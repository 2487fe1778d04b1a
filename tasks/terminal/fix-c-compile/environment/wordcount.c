/* wordcount: count lines, words and bytes of standard input, like wc. */
#include <stdio.h>

struct counts {
    long lines;
    long words;
    long bytes;
};

static void count_stream(FILE *in, struct counts *c) {
    int ch;
    bool in_word = false;
    while ((ch = fgetc(in)) != EOF) {
        c->bytes++;
        if (ch == '\n')
            c->lines++;
        if (isspace(ch)) {
            in_word = false;
        } else if (!in_word) {
            in_word = true;
            c->word++;
        }
    }
}

int main(void) {
    struct counts c = {0, 0, 0};
    count_stream(stdin, &c);
    printf("%ld %ld %ld\n", c.lines, c.words, c.bytes);
    return 0
}
