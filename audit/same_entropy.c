/* LD_PRELOAD library for the audit's `entropy` rerun: every process of the verifier (and
 * what it starts) draws the same entropy, the same sequence of bytes from its first draw on.
 * Within one process the draws still differ from each other (a counter moves on), so two
 * names or keys one program makes stay distinct; across processes they repeat. A verdict that
 * changes under this condition was decided by chance: the verifier judges draws of a random
 * process (a sampler run 400 times, a password made twice) and its outcome on the reference
 * solution is a random variable, not a fact about the task.
 *
 * Covered: getrandom, getentropy and glibc's arc4random family (Python's os.urandom, random and
 * uuid seeding; coreutils' shuf, sort -R, mktemp; bash's $SRANDOM), and opens of /dev/urandom
 * and /dev/random, plain or fortified (open, openat, __open_2 and their 64-bit forms; fopen: a
 * shell's `< /dev/urandom`, `head`, `od`, Perl), which get a memory file of that same sequence.
 * Bash's $RANDOM is seeded the same by the condition script. Not covered: a getrandom made
 * through syscall(2) (OpenSSL, which mixes the clock into its nonce anyway), awk's srand()
 * (seeded from the clock), a static binary.
 * Calls go straight to the kernel (no dlsym), so the host's build loads in older glibc
 * images; musl images refuse it and the rerun is recorded as not applied. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define SEED 0x5431466f72676521ULL /* the same for every process */
#define FILE_BYTES (1 << 20)       /* what a read of /dev/urandom sees before its end */

static uint64_t drawn; /* this process's draws so far (a forked child goes on from its parent's) */

static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* bytes `at`.. of the one sequence, into buf */
static void fill(unsigned char *buf, size_t len, uint64_t at) {
    for (size_t i = 0; i < len; i++) {
        uint64_t word = splitmix(SEED + (at + i) / 8);
        buf[i] = (unsigned char)(word >> (8 * ((at + i) % 8)));
    }
}

ssize_t getrandom(void *buf, size_t len, unsigned int flags) {
    (void)flags;
    fill(buf, len, drawn);
    drawn += len;
    return (ssize_t)len;
}

int getentropy(void *buf, size_t len) {
    if (len > 256) {
        errno = EIO;
        return -1;
    }
    getrandom(buf, len, 0);
    return 0;
}

static int is_random_device(const char *path) {
    return path != NULL && (strcmp(path, "/dev/urandom") == 0 || strcmp(path, "/dev/random") == 0);
}

/* a memory file holding the sequence from its start (each open reads it anew) */
static int random_file(int flags) {
    int fd = (int)syscall(SYS_memfd_create, "t1-entropy", 0);
    if (fd < 0) return fd;
    static unsigned char chunk[65536];
    for (uint64_t at = 0; at < FILE_BYTES; at += sizeof chunk) {
        fill(chunk, sizeof chunk, at);
        if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk) break;
    }
    lseek(fd, 0, SEEK_SET);
    if (flags & O_CLOEXEC) fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}

static int opened(int dirfd, const char *path, int flags, mode_t mode) {
    if (is_random_device(path)) return random_file(flags);
    return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

static mode_t mode_of(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

int open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_of(flags, ap);
    va_end(ap);
    return opened(AT_FDCWD, path, flags, mode);
}

int open64(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_of(flags, ap);
    va_end(ap);
    return opened(AT_FDCWD, path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_of(flags, ap);
    va_end(ap);
    return opened(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_of(flags, ap);
    va_end(ap);
    return opened(dirfd, path, flags, mode);
}

/* the fortified forms _FORTIFY_SOURCE compiles an open into (no mode: no O_CREAT) */
int __open_2(const char *path, int flags) { return opened(AT_FDCWD, path, flags, 0); }

int __open64_2(const char *path, int flags) { return opened(AT_FDCWD, path, flags, 0); }

int __openat_2(int dirfd, const char *path, int flags) { return opened(dirfd, path, flags, 0); }

int __openat64_2(int dirfd, const char *path, int flags) {
    return opened(dirfd, path, flags, 0);
}

/* glibc 2.36's arc4random draws through its own getrandom, which no preload answers */
void arc4random_buf(void *buf, size_t len) { getrandom(buf, len, 0); }

uint32_t arc4random(void) {
    uint32_t r;
    getrandom(&r, sizeof r, 0);
    return r;
}

uint32_t arc4random_uniform(uint32_t upper) {
    if (upper < 2) return 0;
    uint32_t floor = -upper % upper; /* 2^32 mod upper: below it the draw is biased */
    for (;;) {
        uint32_t r = arc4random();
        if (r >= floor) return r % upper;
    }
}

/* fopen's own open is glibc's internal one: the devices are caught here, anything else is
 * opened as fopen would (its mode string turned into open flags) */
static FILE *fopened(const char *path, const char *how) {
    int flags = how[0] == 'r' ? O_RDONLY : how[0] == 'w' ? O_WRONLY | O_CREAT | O_TRUNC
                                                         : O_WRONLY | O_CREAT | O_APPEND;
    if (strchr(how, '+')) flags = (flags & ~(O_RDONLY | O_WRONLY)) | O_RDWR;
    if (strchr(how, 'e')) flags |= O_CLOEXEC;
    if (strchr(how, 'x')) flags |= O_EXCL;
    int fd = is_random_device(path) ? random_file(flags)
                                    : (int)syscall(SYS_openat, AT_FDCWD, path, flags, 0666);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, how);
    if (f == NULL) close(fd);
    return f;
}

FILE *fopen(const char *path, const char *how) { return fopened(path, how); }

FILE *fopen64(const char *path, const char *how) { return fopened(path, how); }
