#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "count.h"

static uint64_t hash_word(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

void counts_init(struct word_counts *c)
{
    memset(c, 0, sizeof *c);
    c->table_cap = 1024;
    c->table = calloc(c->table_cap, sizeof(char *));
    c->lengths_cap = 1024;
    c->lengths = malloc(c->lengths_cap * sizeof(size_t));
}

static void table_insert(struct word_counts *c, char *w);

static void table_grow(struct word_counts *c)
{
    char **old = c->table;
    size_t old_cap = c->table_cap;
    c->table_cap *= 2;
    c->table = calloc(c->table_cap, sizeof(char *));
    c->unique = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i])
            table_insert(c, old[i]);
    free(old);
}

static void table_insert(struct word_counts *c, char *w)
{
    size_t i = hash_word(w) & (c->table_cap - 1);
    while (c->table[i]) {
        if (strcmp(c->table[i], w) == 0) {
            free(w);
            return;
        }
        i = (i + 1) & (c->table_cap - 1);
    }
    c->table[i] = w;
    c->unique++;
    if (c->unique * 2 > c->table_cap)
        table_grow(c);
}

void counts_add(struct word_counts *c, const char *word, size_t len)
{
    if (len > MAX_WORD)
        len = MAX_WORD;
    char *w = malloc(len + 1);
    memcpy(w, word, len);
    w[len] = '\0';
    if (len > strlen(c->longest))
        strcpy(c->longest, w);
    if (c->words == c->lengths_cap) {
        c->lengths_cap *= 2;
        c->lengths = realloc(c->lengths, c->lengths_cap * sizeof(size_t));
    }
    c->lengths[c->words++] = len;
    table_insert(c, w);
}

int count_stream(struct word_counts *c, FILE *in)
{
    char buf[MAX_WORD + 1];
    size_t n = 0;
    int ch;
    while ((ch = fgetc(in)) != EOF) {
        if (isascii(ch) && isalpha(ch)) {
            if (n < MAX_WORD)
                buf[n++] = (char)tolower(ch);
        } else if (n) {
            counts_add(c, buf, n);
            n = 0;
        }
    }
    if (n)
        counts_add(c, buf, n);
    return ferror(in) ? -1 : 0;
}

void counts_free(struct word_counts *c)
{
    for (size_t i = 0; i < c->table_cap; i++)
        free(c->table[i]);
    free(c->table);
    free(c->lengths);
}
