#include <stdio.h>
#include <string.h>
#include "count.h"
#include "stats.h"

int main(int argc, char **argv)
{
    FILE *in = stdin;
    if (argc > 1 && strcmp(argv[1], "-") != 0) {
        in = fopen(argv[1], "r");
        if (!in) {
            perror(argv[1]);
            return 1;
        }
    }
    struct word_counts c;
    counts_init(&c);
    if (count_stream(&c, in) != 0) {
        fprintf(stderr, "read error\n");
        return 1;
    }
    printf("words: %zu\n", c.words);
    printf("unique: %zu\n", c.unique);
    printf("mean_length: %.2f\n", mean_of(c.lengths, c.words));
    printf("stddev_length: %.2f\n", stddev_of(c.lengths, c.words));
    printf("longest: %s\n", c.longest);
    counts_free(&c);
    if (in != stdin)
        fclose(in);
    return 0;
}
