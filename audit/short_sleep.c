/* LD_PRELOAD library for the audit's `sleeps` rerun: every sleep of the verifier (and of
 * what it starts) lasts a tenth of what it asks, the clocks untouched. Against the verifier's
 * sleeps, everything that computes is then ten times slower, as on a loaded machine: a test
 * that sleeps instead of waiting for what it started (a server, a background job) loses the
 * race its author won; a test that polls, or waits for an exit, does not notice. Covered:
 * nanosleep, clock_nanosleep (relative and absolute: Python's time.sleep), usleep, sleep.
 * Sleeps go straight to the kernel (no dlsym), so the host's build loads in older glibc
 * images; musl images refuse it and the rerun is recorded as not applied. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DIVISOR 10

static struct timespec shrink(const struct timespec *t) {
    long long ns = (long long)t->tv_sec * 1000000000LL + t->tv_nsec;
    struct timespec out;
    if (ns < 0) ns = 0;
    ns /= DIVISOR;
    out.tv_sec = ns / 1000000000LL;
    out.tv_nsec = ns % 1000000000LL;
    return out;
}

static int relative(clockid_t clock, const struct timespec *req, struct timespec *rem) {
    struct timespec short_req = shrink(req);
    return (int)syscall(SYS_clock_nanosleep, clock, 0, &short_req, rem);
}

int nanosleep(const struct timespec *req, struct timespec *rem) {
    return relative(CLOCK_MONOTONIC, req, rem);
}

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req,
                    struct timespec *rem) {
    struct timespec wait = *req;
    if (flags & TIMER_ABSTIME) {
        struct timespec now;
        if (syscall(SYS_clock_gettime, clock, &now) != 0) return errno;
        wait.tv_sec = req->tv_sec - now.tv_sec;
        wait.tv_nsec = req->tv_nsec - now.tv_nsec;
        if (wait.tv_nsec < 0) {
            wait.tv_sec -= 1;
            wait.tv_nsec += 1000000000L;
        }
        if (wait.tv_sec < 0) return 0;
        rem = NULL;
    }
    /* clock_nanosleep returns the error number; errno is left alone */
    int saved = errno;
    int r = relative(clock, &wait, rem);
    int err = r == 0 ? 0 : errno;
    errno = saved;
    return err;
}

int usleep(useconds_t us) {
    struct timespec t = {us / 1000000, (long)(us % 1000000) * 1000};
    return relative(CLOCK_MONOTONIC, &t, NULL);
}

unsigned int sleep(unsigned int seconds) {
    struct timespec t = {seconds, 0};
    return relative(CLOCK_MONOTONIC, &t, NULL) == 0 ? 0 : seconds;
}
