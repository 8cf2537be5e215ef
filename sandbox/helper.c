/* t1-sandbox-helper: the privileged steps of the local sandbox, without a shell.
 *
 *   helper holder NS DISK LAYERS UPPER WORK CGROUP_DIR IDMAP OWNER_BASE KEEP
 *       The sandbox's anchor process. In a new mount and network namespace (loopback up,
 *       ports below 1024 and ping open to the sandbox's unprivileged ids):
 *       a small tmpfs on NS; DISK (a formatted ext4 image, or "-") attached to a free loop
 *       device and mounted on NS/disk, where the writable layer lives (NS/disk/upper); or,
 *       for an image build, UPPER (a directory, overlay work dir WORK) is the writable layer. NS/root is the overlay
 *       of LAYERS (lowerdir syntax, top first) under that writable layer, NS/image a read-only
 *       view of LAYERS alone (what the image shipped). It makes the sandbox's user namespace
 *       (IDMAP, "0 HOSTBASE COUNT", for both uid_map and gid_map: root of the sandbox is host
 *       uid HOSTBASE), owned by host uid OWNER_BASE + its own pid, and keeps it open as fd 4. It keeps fd 3 open on NS, chroots into
 *       NS/root (so /proc/PID/root is the sandbox root), prints "ready" and waits for its
 *       stdin to close: the runner stopped it, or died. It then SIGKILLs every process of the
 *       given cgroups, prints "stopped" once they are gone, and exits; its namespaces, mounts
 *       and loop device go with it.
 *       NS/etc, where the runtime's /etc files live, is a small tmpfs of its own: filling it
 *       (appending to /etc/hosts) fills nothing else.
 *       Of the host's mounts its namespace keeps only those the sandbox's processes need
 *       (prune_mounts): / and the mounts on the way to NS, to LAYERS, to the libraries and
 *       to the colon-separated paths in KEEP (bubblewrap), /proc and /dev. Every bubblewrap
 *       start reads the whole mount table once per mount it makes, so its cost would
 *       otherwise grow with the host's mounts (a Kubernetes node has hundreds).
 *   helper judge HOLDER_PID NS LAYERS NAME
 *       In the holder's mount namespace, the verifier's fresh root (sandbox.judge):
 *       NS/NAME/root, the overlay of LAYERS under NS/disk/NAME/upper (which the runner
 *       prepared before: the agent's outputs as data, the tests, the report directory), and
 *       NS/NAME/etc, a small tmpfs of its own for the runtime's /etc files.
 *   helper exec HOLDER_PID CPU_SECONDS TTY TASKS_FILE... -- PROGRAM ARGS...
 *       Join the cgroups (write "0", ourselves, to each group's TASKS_FILE: we are one
 *       thread, so that moves the whole process; see enter()), bound CPU time, enter the
 *       holder's mount and network namespaces, and with TTY=1 start a new session whose
 *       controlling terminal is stdin; then enter the holder's user namespace as its root
 *       (host uid HOSTBASE: no capability over anything of the host's from here on) and exec
 *       PROGRAM (bubblewrap).
 *
 * Built on first use by sandbox/launcher.py with the system C compiler.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

static int die(const char *what) { perror(what); return 1; }

/* The runtime's /etc files (hosts, resolv.conf, hostname) on a tmpfs of their own. */
#define ETC_TMPFS "size=1m,nr_inodes=64,mode=0755"
#define SETTLE_DEPTH 64 /* directory levels of the judge's layer looked up before the verifier starts */

static int write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* A user namespace mapped by IDMAP ("0 HOSTBASE COUNT"), returned as an open fd: a child
 * unshares it, we write its maps, open it and let the child go (the fd keeps it alive).
 * The child first becomes host uid OWNER (an unprivileged id of this sandbox alone): the
 * namespace's owner is who creates it, and the kernel charges what the namespace's processes
 * hold in per-user counts (inotify instances and watches, namespaces, ...) to its owner in
 * the parent namespace. Created by root, one sandbox holding 128 inotify instances left no
 * inotify for any root process of the host, nor for any other sandbox. Its RLIMIT_NPROC is
 * raised to its hard limit first: the namespace's processes count against it, as an owner's. */
static int make_userns(const char *idmap, unsigned long owner) {
    int ready[2], go[2];
    char b = 0, path[64];
    struct rlimit nproc;
    if (pipe2(ready, O_CLOEXEC) || pipe2(go, O_CLOEXEC)) return -1;
    pid_t c = fork();
    if (c < 0) return -1;
    if (c == 0) {
        close(ready[0]);
        close(go[1]);
        /* as high as we may (raising the hard limit needs CAP_SYS_RESOURCE) */
        if (!getrlimit(RLIMIT_NPROC, &nproc)) {
            nproc.rlim_cur = nproc.rlim_max;
            setrlimit(RLIMIT_NPROC, &nproc);
        }
        if (setgroups(0, NULL) ||
            setresgid((gid_t)owner, (gid_t)owner, (gid_t)owner) ||
            setresuid((uid_t)owner, (uid_t)owner, (uid_t)owner))
            _exit(1);
        if (unshare(CLONE_NEWUSER) || write(ready[1], "x", 1) != 1) _exit(1);
        if (read(go[0], &b, 1) < 0) _exit(1); /* until the parent holds the namespace */
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    int fd = -1;
    if (read(ready[0], &b, 1) == 1) {
        snprintf(path, sizeof path, "/proc/%d/uid_map", (int)c);
        int ok = !write_file(path, idmap);
        snprintf(path, sizeof path, "/proc/%d/gid_map", (int)c);
        ok = ok && !write_file(path, idmap);
        snprintf(path, sizeof path, "/proc/%d/ns/user", (int)c);
        if (ok) fd = open(path, O_RDONLY);
    }
    close(go[1]);
    close(ready[0]);
    waitpid(c, NULL, 0);
    return fd;
}

static int loopback_up(void) {
    struct ifreq ifr;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -1;
    memset(&ifr, 0, sizeof ifr);
    strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) { close(s); return -1; }
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    int rc = ioctl(s, SIOCSIFFLAGS, &ifr);
    close(s);
    return rc;
}

/* Attach IMAGE to a free loop device (autoclear) and mount it as ext4 on TARGET. */
static int mount_disk(const char *image, const char *target) {
    int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    int file = open(image, O_RDWR | O_CLOEXEC);
    if (ctl < 0) return die("/dev/loop-control");
    if (file < 0) return die(image);
    for (int attempt = 0; attempt < 64; attempt++) {
        int n = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (n < 0) return die("LOOP_CTL_GET_FREE");
        char dev[64];
        snprintf(dev, sizeof dev, "/dev/loop%d", n);
        int fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
            mknod(dev, S_IFBLK | 0660, makedev(7, n));
            fd = open(dev, O_RDWR | O_CLOEXEC);
        }
        if (fd < 0) return die(dev);
        struct loop_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.fd = file;
        cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        strncpy((char *)cfg.info.lo_file_name, image, LO_NAME_SIZE - 1);
        if (ioctl(fd, LOOP_CONFIGURE, &cfg) < 0) {
            close(fd);
            if (errno == EBUSY) continue; /* another sandbox took it first */
            return die("LOOP_CONFIGURE");
        }
        int rc = mount(dev, target, "ext4", MS_NOSUID | MS_NODEV, "");
        int err = errno;
        close(fd); /* the mount keeps the device; autoclear frees it at unmount */
        close(file);
        close(ctl);
        if (rc) { errno = err; return die("mount disk"); }
        return 0;
    }
    fprintf(stderr, "no free loop device\n");
    return 1;
}

/* SIGKILL every process listed in the group DIRFD (and its child groups); count them.
 * Works on fds opened before the holder chrooted: the cgroup paths are not in its root. */
static int kill_tree(int dirfd) {
    int seen = 0, pid;
    int fd = openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        FILE *f = fdopen(fd, "r");
        while (f && fscanf(f, "%d", &pid) == 1) { kill(pid, SIGKILL); seen++; }
        if (f) fclose(f); else close(fd);
    }
    int dup_fd = dup(dirfd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) return seen;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sub < 0) continue; /* a file, not a child group */
        seen += kill_tree(sub);
        close(sub);
    }
    closedir(d);
    return seen;
}

static void kill_group(int dirfd) {
    for (int round = 0; round < 5000 && kill_tree(dirfd); round++) usleep(200);
}

/* Is mount point MP one to keep: "/", one on the way to (or equal to) a KEEP path, or one
 * at or below TREE (NS)? */
static int kept(const char *mp, const char *tree, char **keep, int n) {
    size_t len = strlen(mp), tl = strlen(tree);
    if (!strcmp(mp, "/")) return 1;
    if (!strncmp(mp, tree, tl) && (mp[tl] == '\0' || mp[tl] == '/')) return 1;
    for (int i = 0; i < n; i++)
        if (!strncmp(keep[i], mp, len) && (keep[i][len] == '\0' || keep[i][len] == '/'))
            return 1;
    return 0;
}

/* mountinfo's octal escapes (\040 for a space) undone, in place. */
static void unescape(char *s) {
    char *o = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
}

/* Detach, in this (private) mount namespace, every mount nothing of the sandbox uses; the
 * deepest first (mountinfo lists a mount after the one it sits on). Best effort: a mount
 * that will not go stays, as before. */
static void prune_mounts(const char *ns, const char *layers, const char *extra) {
    static const char *fixed[] = {"/proc", "/dev", "/dev/pts", "/etc/ld.so.cache",
                                  "/usr/lib", "/usr/lib64", "/lib", "/lib64"};
    char *keep[64], lay[8192], ext[4096], line[8192], *points[1024];
    int n = 0, count = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) keep[n++] = (char *)fixed[i];
    snprintf(lay, sizeof lay, "%s", layers);
    snprintf(ext, sizeof ext, "%s", extra);
    for (char *t = strtok(lay, ":"); t && n < 48; t = strtok(NULL, ":")) keep[n++] = t;
    for (char *t = strtok(ext, ":"); t && n < 64; t = strtok(NULL, ":")) keep[n++] = t;
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f) return;
    while (count < 1024 && fgets(line, sizeof line, f)) {
        char *field = line, *mp = NULL;
        for (int i = 0; i < 5 && field; i++) {  /* the fifth field: the mount point */
            char *sp = strchr(field, ' ');
            if (i == 4) { if (sp) *sp = '\0'; mp = field; }
            field = sp ? sp + 1 : NULL;
        }
        if (!mp) continue;
        unescape(mp);
        if (!kept(mp, ns, keep, n)) points[count++] = strdup(mp);
    }
    fclose(f);
    while (count-- > 0) {
        if (points[count]) umount2(points[count], MNT_DETACH);
        free(points[count]);
    }
}

static int holder(char **a) {
    const char *ns = a[0], *disk = a[1], *layers = a[2], *upper = a[3], *work = a[4];
    const char *idmap = a[6];
    unsigned long base = 0, count = 0, owner_base = strtoul(a[7], NULL, 10);
    if (sscanf(idmap, "0 %lu %lu", &base, &count) != 2 || base == 0 || count == 0 ||
        owner_base == 0) {
        fprintf(stderr, "bad IDMAP %s or OWNER_BASE %s\n", idmap, a[7]);
        return 2;
    }
    char root[4096], image[4096], dsk[4096], up[4096], wk[4096], opts[8192];
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    if (unshare(CLONE_NEWNS | CLONE_NEWNET)) return die("unshare");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) return die("make-private");
    if (loopback_up()) return die("loopback");
    /* As Docker does: the sandbox's root may bind low ports and ping in its own network. */
    if (write_file("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0") ||
        write_file("/proc/sys/net/ipv4/ping_group_range", "0 2147483647"))
        return die("network sysctls");
    /* 0711: the sandbox's root (an unprivileged host uid) passes through to its places. */
    if (mount("t1-sandbox", ns, "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=0711"))
        return die("mount tmpfs");
    snprintf(root, sizeof root, "%s/root", ns);
    snprintf(image, sizeof image, "%s/image", ns);
    if (mkdir(root, 0755) || mkdir(image, 0755)) return die("mkdir");
    snprintf(dsk, sizeof dsk, "%s/etc", ns);
    if (mkdir(dsk, 0755) || mount("t1-etc", dsk, "tmpfs", MS_NOSUID | MS_NODEV, ETC_TMPFS))
        return die("mount etc");
    if (strcmp(disk, "-")) {
        snprintf(dsk, sizeof dsk, "%s/disk", ns);
        if (mkdir(dsk, 0755) || mount_disk(disk, dsk)) return 1;
        snprintf(up, sizeof up, "%s/upper", dsk);
        snprintf(wk, sizeof wk, "%s/work", dsk);
        if ((mkdir(up, 0755) && errno != EEXIST) || (mkdir(wk, 0700) && errno != EEXIST))
            return die("mkdir upper");
        if (chown(up, (uid_t)base, (gid_t)base)) return die("chown upper"); /* the root dir */
    } else {
        snprintf(up, sizeof up, "%s", upper);
        snprintf(wk, sizeof wk, "%s", work);
    }
    snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s", layers, up, wk);
    if (mount("t1-root", root, "overlay", 0, opts)) return die("mount sandbox root");
    if (strchr(layers, ':')) {
        snprintf(opts, sizeof opts, "lowerdir=%s", layers);
        if (mount("t1-image", image, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, opts))
            return die("mount image view");
    } else if (mount(layers, image, NULL, MS_BIND, NULL) ||
               mount(NULL, image, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
                     NULL)) {
        return die("bind image view");
    }
    int nsfd = open(ns, O_RDONLY | O_DIRECTORY); /* fd 3: the runner reaches NS through it */
    if (nsfd != 3) return die("ns fd");
    /* fd 4: `exec` enters it through /proc/PID/fd/4. Its owner: OWNER_BASE + our pid, an id
     * no other live sandbox has (pids are unique while we live, and so is the namespace). */
    int userns = make_userns(idmap, owner_base + (unsigned long)getpid());
    if (userns < 0) return die("user namespace");
    if (userns != 4 && (dup2(userns, 4) != 4 || close(userns))) return die("user namespace fd");
    int cgfd = open(a[5], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cgfd < 0) return die(a[5]);
    prune_mounts(ns, layers, a[8]);
    if (chroot(root) || chdir("/")) return die("chroot");
    printf("ready\n");
    fflush(stdout);
    char buf[64];
    for (;;) {
        ssize_t r = read(0, buf, sizeof buf);
        if (r == 0 || (r < 0 && errno != EINTR)) break;
    }
    kill_group(cgfd);
    printf("stopped\n"); /* nothing of the sandbox runs: the runner need not wait for our exit */
    fflush(stdout);
    return 0;
}

/* Look up every directory of the judge's writable layer through the mounted ROOT (below
 * UPFD/ROOTFD, DEPTH levels at most), then read it. The runner wrote that layer beside the
 * overlay, so a directory the image also has is a merge the kernel has not met: its first
 * lookup stores the lower directory's origin on it and marks its parent impure, and a later
 * read may clear that mark; each is an xattr write that moves the directory's ctime. Settled
 * here, the verifier sees directories that hold still while it reads them (tar's "file
 * changed as we read it"). Best effort: what cannot be opened is left as it is. */
static void settle(int upfd, int rootfd, int depth) {
    int dup_fd = dup(upfd);
    DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
    struct dirent *e;
    if (!d) { if (dup_fd >= 0) close(dup_fd); return; }
    while ((e = readdir(d))) {
        if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
        int up = openat(upfd, e->d_name, flags);
        int down = openat(rootfd, e->d_name, flags); /* the lookup */
        if (up >= 0 && down >= 0 && depth > 0) settle(up, down, depth - 1);
        if (up >= 0) close(up);
        if (down >= 0) close(down);
    }
    closedir(d);
    int again = dup(rootfd);
    DIR *r = again < 0 ? NULL : fdopendir(again);
    if (r) { while (readdir(r)) {} closedir(r); } /* the read */
    else if (again >= 0) close(again);
}

/* The verifier's fresh root in the holder's mount namespace (see the top of this file). */
static int judge_root(char **a) {
    const char *ns = a[1], *layers = a[2], *name = a[3];
    char path[64], dir[4096], root[4096], etc[4096], up[4096], wk[4096], opts[12288];
    if (strchr(name, '/') || !strcmp(name, "..") || !strcmp(name, ".")) return 2;
    snprintf(path, sizeof path, "/proc/%s/ns/mnt", a[0]);
    int mnt = open(path, O_RDONLY | O_CLOEXEC);
    if (mnt < 0 || setns(mnt, CLONE_NEWNS)) return die("enter the holder's mounts");
    close(mnt);
    snprintf(dir, sizeof dir, "%s/%s", ns, name);
    snprintf(root, sizeof root, "%s/root", dir);
    snprintf(etc, sizeof etc, "%s/etc", dir);
    snprintf(up, sizeof up, "%s/disk/%s/upper", ns, name);
    snprintf(wk, sizeof wk, "%s/disk/%s/work", ns, name);
    if (mkdir(dir, 0711) || mkdir(root, 0755) || mkdir(etc, 0755)) return die("mkdir judge");
    if (mount("t1-etc", etc, "tmpfs", MS_NOSUID | MS_NODEV, ETC_TMPFS)) return die("mount etc");
    snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s", layers, up, wk);
    if (mount("t1-judge", root, "overlay", 0, opts)) return die("mount judge root");
    int upfd = open(up, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int pass = 0; pass < 2 && upfd >= 0 && rootfd >= 0; pass++) /* marks set, then cleared */
        settle(upfd, rootfd, SETTLE_DEPTH);
    if (upfd >= 0) close(upfd);
    if (rootfd >= 0) close(rootfd);
    return 0;
}

/* This process is single-threaded, so moving its one thread (v1 `tasks`, pid 0: the caller)
 * moves the process, before it runs or forks anything. Writing our pid to `cgroup.procs`
 * would do the same but takes the kernel's global threadgroup lock for writing, which waits
 * out an RCU grace period (about 12 ms on a busy 2-core machine) per command; moving the
 * calling thread itself needs no such lock (Linux >= 6.0; older kernels take it either way). */
static int enter(int argc, char **a) {
    int i = 3;
    char path[64];
    struct rlimit cpu;
    for (; i < argc && strcmp(a[i], "--"); i++) {
        int fd = open(a[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0\n", 2) != 2) return die(a[i]);
        close(fd);
    }
    if (i + 1 >= argc) { fprintf(stderr, "exec: missing -- PROGRAM\n"); return 2; }
    cpu.rlim_cur = cpu.rlim_max = (rlim_t)atol(a[1]);
    if (setrlimit(RLIMIT_CPU, &cpu)) return die("setrlimit");
    snprintf(path, sizeof path, "/proc/%s/ns/net", a[0]);
    int net = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof path, "/proc/%s/ns/mnt", a[0]);
    int mnt = open(path, O_RDONLY | O_CLOEXEC);
    if (net < 0 || mnt < 0) return die("open namespaces");
    if (setns(net, CLONE_NEWNET) || setns(mnt, CLONE_NEWNS)) return die("setns");
    close(net);
    close(mnt);
    if (!strcmp(a[2], "1")) {
        if (setsid() < 0) return die("setsid");
        if (ioctl(0, TIOCSCTTY, 0) < 0) return die("TIOCSCTTY");
    }
    /* Last: after this we hold no capability outside the sandbox's user namespace. */
    snprintf(path, sizeof path, "/proc/%s/fd/4", a[0]);
    int user = open(path, O_RDONLY | O_CLOEXEC);
    if (user < 0 || setns(user, CLONE_NEWUSER)) return die("enter user namespace");
    close(user);
    if (setgroups(0, NULL) || setresgid(0, 0, 0) || setresuid(0, 0, 0))
        return die("become the sandbox's root");
    execvp(a[i + 1], &a[i + 1]);
    return die(a[i + 1]);
}

int main(int argc, char **argv) {
    if (argc == 11 && !strcmp(argv[1], "holder")) return holder(argv + 2);
    if (argc > 5 && !strcmp(argv[1], "exec")) return enter(argc - 2, argv + 2);
    if (argc == 6 && !strcmp(argv[1], "judge")) return judge_root(argv + 2);
    fprintf(stderr, "usage: helper holder NS DISK LAYERS UPPER WORK CGROUP_DIR IDMAP OWNER_BASE KEEP | "
                    "judge PID NS LAYERS NAME | exec PID CPU TTY PROCS... -- CMD\n");
    return 2;
}
