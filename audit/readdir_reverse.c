/* LD_PRELOAD library for the audit's `order` rerun: readdir() and readdir64() list every
 * directory in the reverse of the kernel's order, so a verifier that depends on the order
 * its filesystem happens to list (a saved `ls -U` compared with os.listdir) sees another
 * one. Entries are read with getdents64 on the stream's descriptor and kept per stream;
 * rewinddir (which seeks the descriptor back to 0) and a stream reused at the same address
 * are noticed by the descriptor's offset. Only base-version glibc symbols are used (no
 * dlsym), so the host's build loads in older glibc images; musl images refuse it and the
 * audit falls back to re-creating entries. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SLOTS 64

struct listing {
    DIR *dir;
    int fd;
    off_t end;      /* the descriptor's offset once everything was read */
    char *buf;      /* getdents64 records, as the kernel wrote them */
    size_t *at;     /* record offsets in buf */
    size_t n, next; /* records, and how many were returned (from the last) */
};

static struct listing slots[SLOTS];
static unsigned evict;
static int lock;

static void drop(struct listing *l) {
    free(l->buf);
    free(l->at);
    memset(l, 0, sizeof *l);
}

static int fill(struct listing *l, DIR *d) {
    size_t cap = 32768, len = 0, ncap = 64;
    int fd = dirfd(d);
    l->dir = d;
    l->fd = fd;
    l->buf = malloc(cap);
    l->at = malloc(ncap * sizeof *l->at);
    if (!l->buf || !l->at || lseek(fd, 0, SEEK_SET) < 0)
        return -1;
    for (;;) {
        if (cap - len < 16384) {
            char *b = realloc(l->buf, cap *= 2);
            if (!b) return -1;
            l->buf = b;
        }
        long got = syscall(SYS_getdents64, fd, l->buf + len, cap - len);
        if (got < 0) return -1;
        if (got == 0) break;
        for (size_t p = len; p < len + (size_t)got;) {
            if (l->n == ncap) {
                size_t *a = realloc(l->at, (ncap *= 2) * sizeof *a);
                if (!a) return -1;
                l->at = a;
            }
            l->at[l->n++] = p;
            p += ((struct dirent64 *)(l->buf + p))->d_reclen;
        }
        len += (size_t)got;
    }
    l->end = lseek(fd, 0, SEEK_CUR);
    return 0;
}

static struct dirent64 *next_entry(DIR *d) {
    struct dirent64 *out = NULL;
    struct listing *l = NULL;
    while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE)) {
    }
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].dir == d) l = &slots[i];
    if (l && (l->fd != dirfd(d) || lseek(l->fd, 0, SEEK_CUR) != l->end))
        drop(l), l = NULL; /* rewound, or a new stream at a freed one's address */
    if (!l) {
        for (int i = 0; i < SLOTS && !l; i++)
            if (!slots[i].dir) l = &slots[i];
        if (!l) drop(l = &slots[evict++ % SLOTS]);
        if (fill(l, d) < 0) {
            drop(l);
            l = NULL;
        }
    }
    if (l && l->next < l->n)
        out = (struct dirent64 *)(l->buf + l->at[l->n - 1 - l->next++]);
    __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
    return out;
}

struct dirent64 *readdir64(DIR *d) { return next_entry(d); }
struct dirent *readdir(DIR *d) { return (struct dirent *)next_entry(d); }
