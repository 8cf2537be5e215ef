/* wordfreq: print the N most frequent words of a text file.
 * A word is a maximal run of ASCII letters, compared case-insensitively (lower-cased).
 * Output: one line per word, "<count> <word>", most frequent first, ties by word (strcmp).
 * Usage: wordfreq FILE N
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    char *word;
    int count;
    struct entry *next;
};

#define NBUCKETS 4096
static struct entry *buckets[NBUCKETS];
static int nwords;

static unsigned hash(const char *s) {
    unsigned h = 5381;
    while (*s)
        h = h * 33 + (unsigned char)*s++;
    return h % NBUCKETS;
}

static void add(const char *w) {
    unsigned h = hash(w);
    for (struct entry *e = buckets[h]; e; e = e->next) {
        if (strcmp(e->word, w) == 0) {
            e->count++;
            return;
        }
    }
    struct entry *e = malloc(sizeof *e);
    e->word = strdup(w);
    e->count = 1;
    e->next = buckets[h];
    buckets[h] = e;
    nwords++;
}

static int by_count(const void *a, const void *b) {
    const struct entry *x = *(struct entry *const *)a;
    const struct entry *y = *(struct entry *const *)b;
    return y->count - x->count;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s FILE N\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    int n = atoi(argv[2]);
    char buf[32];
    int len = 0, c;
    while ((c = fgetc(f)) != EOF) {
        if (isalpha(c) && c < 128) {
            buf[len++] = tolower(c);
        } else if (len > 0) {
            buf[len] = '\0';
            add(buf);
            len = 0;
        }
    }
    if (len > 0) {
        buf[len] = '\0';
        add(buf);
    }
    fclose(f);

    struct entry **all = malloc(nwords);
    int k = 0;
    for (int i = 0; i < NBUCKETS; i++)
        for (struct entry *e = buckets[i]; e; e = e->next)
            all[k++] = e;
    qsort(all, nwords, sizeof *all, by_count);
    for (int i = 0; i < n; i++)
        printf("%d %s\n", all[i]->count, all[i]->word);
    return 0;
}
