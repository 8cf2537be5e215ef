/* t1-sandbox-helper: the two privileged steps of the local sandbox without a shell.
 *
 *   helper holder NS SIZE_MB MASK ENV_LAYER UPPER WORK
 *       New private mount namespace: tmpfs on NS, read-only host view
 *       overlay(MASK:/) on NS/host, sandbox root overlay on NS/root (ENV_LAYER, UPPER and
 *       WORK may be ""), chroot into it, print "ready", then wait to be killed.
 *   helper exec HOLDER_PID CPU_SECONDS PROCS_FILE... -- PROGRAM ARGS...
 *       Join the cgroups (write our pid to each PROCS_FILE), bound CPU time, enter the
 *       holder's mount namespace, exec PROGRAM (bubblewrap).
 *
 * Built on first use by sandbox/launcher.py with the system C compiler; the Python code falls
 * back to the equivalent shell commands when no compiler is available.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static int die(const char *what) { perror(what); return 1; }

static int holder(char **a) {
    const char *ns = a[0], *size = a[1], *mask = a[2], *env = a[3];
    const char *upper = a[4], *work = a[5];
    char p1[4096], p2[4096], opts[16384], up[4096], wk[4096];
    if (unshare(CLONE_NEWNS)) return die("unshare");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) return die("make-private");
    snprintf(opts, sizeof opts, "size=%sm,mode=0755", size);
    if (mount("t1-sandbox", ns, "tmpfs", 0, opts)) return die("mount tmpfs");
    snprintf(p1, sizeof p1, "%s/host", ns);
    snprintf(p2, sizeof p2, "%s/root", ns);
    if (mkdir(p1, 0755) || mkdir(p2, 0755)) return die("mkdir");
    snprintf(opts, sizeof opts, "lowerdir=%s:/", mask);
    if (mount("t1-host", p1, "overlay", MS_RDONLY, opts)) return die("mount host view");
    if (!*upper) {
        snprintf(up, sizeof up, "%s/up", ns);
        snprintf(wk, sizeof wk, "%s/work", ns);
        if (mkdir(up, 0755) || mkdir(wk, 0755)) return die("mkdir upper");
        upper = up;
        work = wk;
    }
    if (*env)
        snprintf(opts, sizeof opts, "lowerdir=%s:%s,upperdir=%s,workdir=%s", env, p1, upper, work);
    else
        snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s", p1, upper, work);
    if (mount("t1-root", p2, "overlay", 0, opts)) return die("mount sandbox root");
    if (chroot(p2) || chdir("/")) return die("chroot");
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}

static int enter(int argc, char **a) {
    int i = 2;
    char pid[32], ns[64];
    struct rlimit cpu;
    snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    for (; i < argc && strcmp(a[i], "--"); i++) {
        int fd = open(a[i], O_WRONLY);
        if (fd < 0 || write(fd, pid, strlen(pid)) < 0) return die(a[i]);
        close(fd);
    }
    if (i + 1 >= argc) { fprintf(stderr, "exec: missing -- PROGRAM\n"); return 2; }
    cpu.rlim_cur = cpu.rlim_max = (rlim_t)atol(a[1]);
    if (setrlimit(RLIMIT_CPU, &cpu)) return die("setrlimit");
    snprintf(ns, sizeof ns, "/proc/%s/ns/mnt", a[0]);
    int fd = open(ns, O_RDONLY);
    if (fd < 0 || setns(fd, CLONE_NEWNS)) return die("setns");
    close(fd);
    execvp(a[i + 1], &a[i + 1]);
    return die(a[i + 1]);
}

int main(int argc, char **argv) {
    if (argc == 8 && !strcmp(argv[1], "holder")) return holder(argv + 2);
    if (argc > 4 && !strcmp(argv[1], "exec")) return enter(argc - 2, argv + 2);
    fprintf(stderr, "usage: helper holder NS SIZE MASK ENV UPPER WORK | exec PID CPU FILE... -- CMD\n");
    return 2;
}
