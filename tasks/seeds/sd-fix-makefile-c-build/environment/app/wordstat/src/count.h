#ifndef WORDSTAT_COUNT_H
#define WORDSTAT_COUNT_H
#include <stddef.h>
#include <stdio.h>

#define MAX_WORD 64

struct word_counts {
    size_t words;
    size_t unique;
    size_t *lengths;      /* length of every word, in input order */
    size_t lengths_cap;
    char longest[MAX_WORD + 1];
    char **table;         /* open-addressing set of distinct words */
    size_t table_cap;
};

void counts_init(struct word_counts *c);
void counts_add(struct word_counts *c, const char *word, size_t len);
void counts_free(struct word_counts *c);
int count_stream(struct word_counts *c, FILE *in);
#endif
