/* LD_PRELOAD library for the audit's `sleeps` rerun, the clocks untouched. Two modes:
 *
 * - T1_SLEEP_CUT set (nanoseconds, comma-separated): the sleeps the static look suspects
 *   of synchronizing (a fixed sleep after starting a server or a job, no wait between) are
 *   cut to nothing, every other sleep lasts what it asks, and every process that loads this
 *   library starts START_DELAY_NS late (what the sleep waited for cannot be done before the
 *   sleeper goes on: a job of a few milliseconds otherwise won that race when the cut sleep
 *   yielded the CPU to it). A verdict that changes then rested on that sleep outlasting what
 *   it started: a race, whatever the margin and the machine (the divided mode below decided
 *   by the margin). Polls keep their pace. A sleep matches a duration d when it asks for d,
 *   or a little less (a tenth): Python's time.sleep asks for an absolute deadline, which
 *   arrives here as d less a few microseconds.
 * - otherwise every sleep lasts a tenth of what it asks: against the verifier's sleeps,
 *   everything that computes is ten times slower, as on a loaded machine.
 *
 * Covered: nanosleep, clock_nanosleep (relative and absolute: Python's time.sleep), usleep,
 * sleep. Sleeps go straight to the kernel (no dlsym), so the host's build loads in older
 * glibc images; musl images refuse it and the rerun is recorded as not applied. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DIVISOR 10

#define MAX_CUTS 16

/* the durations to cut (T1_SLEEP_CUT), read once; -1 before the first read */
static long long cuts[MAX_CUTS];
static int n_cuts = -1;

static void read_cuts(void) {
    const char *s = getenv("T1_SLEEP_CUT");
    int n = 0;
    while (s != NULL && *s != '\0' && n < MAX_CUTS) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s) break;
        if (v > 0) cuts[n++] = v;
        if (*end != ',') break;
        s = end + 1;
    }
    n_cuts = n;
}

#define START_DELAY_NS 300000000LL

__attribute__((constructor)) static void late_start(void) {
    read_cuts();
    if (n_cuts > 0) {
        struct timespec t = {START_DELAY_NS / 1000000000LL, START_DELAY_NS % 1000000000LL};
        syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &t, NULL);
    }
}

static long long shortened(long long ns) {
    if (n_cuts < 0) read_cuts();
    if (n_cuts == 0) return ns / DIVISOR;
    for (int i = 0; i < n_cuts; i++)
        if (ns <= cuts[i] && ns >= cuts[i] - cuts[i] / 10) return 0;
    return ns;
}

static struct timespec shrink(const struct timespec *t) {
    long long ns = (long long)t->tv_sec * 1000000000LL + t->tv_nsec;
    struct timespec out;
    if (ns < 0) ns = 0;
    ns = shortened(ns);
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
