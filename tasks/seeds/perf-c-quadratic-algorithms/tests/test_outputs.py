import bisect
import os
import random
import resource
import shutil
import subprocess
import tempfile

SRC = "/app/seqstat"
# The shipped (slow) program and Makefile, kept verbatim so the checks can compare.
ORIGINAL_C = '/* seqstat: statistics of an integer sequence.\n * Input (stdin): a count n, then n integers (each fits in a signed 32-bit int), whitespace\n * separated.\n * Output:\n *   lis <length of the longest strictly increasing subsequence>\n *   inversions <number of pairs i < j with a[i] > a[j]>\n *   distinct <number of distinct values>\n */\n#include <stdio.h>\n#include <stdlib.h>\n\nint main(void) {\n    long n;\n    if (scanf("%ld", &n) != 1 || n < 0)\n        return 1;\n    int *a = malloc((n ? n : 1) * sizeof *a);\n    for (long i = 0; i < n; i++)\n        if (scanf("%d", &a[i]) != 1)\n            return 1;\n\n    /* longest strictly increasing subsequence: O(n^2) dynamic programming */\n    int *best = malloc((n ? n : 1) * sizeof *best);\n    long lis = 0;\n    for (long i = 0; i < n; i++) {\n        best[i] = 1;\n        for (long j = 0; j < i; j++)\n            if (a[j] < a[i] && best[j] + 1 > best[i])\n                best[i] = best[j] + 1;\n        if (best[i] > lis)\n            lis = best[i];\n    }\n\n    /* inversions: O(n^2) pair scan */\n    long long inv = 0;\n    for (long i = 0; i < n; i++)\n        for (long j = i + 1; j < n; j++)\n            if (a[i] > a[j])\n                inv++;\n\n    /* distinct values: O(n^2) "seen before?" scan */\n    long distinct = 0;\n    for (long i = 0; i < n; i++) {\n        int seen = 0;\n        for (long j = 0; j < i && !seen; j++)\n            if (a[j] == a[i])\n                seen = 1;\n        distinct += !seen;\n    }\n\n    printf("lis %ld\\ninversions %lld\\ndistinct %ld\\n", lis, inv, distinct);\n    return 0;\n}\n'
ORIGINAL_MAKEFILE = 'CC = gcc\nCFLAGS = -O2 -Wall\n\nseqstat: seqstat.c\n\t$(CC) $(CFLAGS) -o $@ $<\n\nclean:\n\trm -f seqstat\n\n.PHONY: clean\n'
_CACHE = {}


def build(src_dir, key):
    if key not in _CACHE:
        d = tempfile.mkdtemp() + "/s"
        shutil.copytree(src_dir, d, ignore=shutil.ignore_patterns("seqstat", "*.o", "data"))
        r = subprocess.run(["make", "-C", d], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, "make failed: " + r.stderr[-600:]
        _CACHE[key] = d + "/seqstat"
    return _CACHE[key]


def original():
    if "orig_src" not in _CACHE:
        d = tempfile.mkdtemp()
        open(d + "/seqstat.c", "w").write(ORIGINAL_C)
        open(d + "/Makefile", "w").write(ORIGINAL_MAKEFILE)
        _CACHE["orig_src"] = d
    return build(_CACHE["orig_src"], "orig")


def candidate():
    return build(SRC, "cand")


def run(binary, path, limit=60):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(path, "rb") as f:
        try:
            r = subprocess.run([binary], stdin=f, capture_output=True, timeout=limit)
        except subprocess.TimeoutExpired:
            r = subprocess.CompletedProcess([binary], -9, b"", b"timeout")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cached_run(key, binary, path, limit=60):
    if key not in _CACHE:
        _CACHE[key] = run(binary, path, limit)
    return _CACHE[key]


def reference(xs):
    tails = []
    for x in xs:
        i = bisect.bisect_left(tails, x)
        if i == len(tails):
            tails.append(x)
        else:
            tails[i] = x
    ranks = {v: i + 1 for i, v in enumerate(sorted(set(xs)))}
    tree = [0] * (len(ranks) + 1)
    inv = 0
    for seen, x in enumerate(xs):
        r, le = ranks[x], 0
        while r > 0:
            le += tree[r]
            r -= r & -r
        inv += seen - le
        r = ranks[x]
        while r < len(tree):
            tree[r] += 1
            r += r & -r
    return b"lis %d\ninversions %d\ndistinct %d\n" % (len(tails), inv, len(ranks))


def write_input(xs):
    fd, p = tempfile.mkstemp(suffix=".txt")
    with os.fdopen(fd, "w") as f:
        f.write(f"{len(xs)}\n" + " ".join(map(str, xs)) + "\n")
    return p


def test_builds_with_make():
    assert os.access(candidate(), os.X_OK)


def test_sample_identical_to_original():
    want, _ = cached_run("orig_sample", original(), SRC + "/data/sample.txt")
    got, _ = cached_run("cand_sample", candidate(), SRC + "/data/sample.txt")
    assert got.returncode == 0 and got.stdout == want.stdout, got.stdout[-300:]


def test_generated_inputs_identical():
    rng = random.Random(77)
    cases = [[], [5], [3, 3, 3], [-2147483648, 2147483647, 0], list(range(50, 0, -1))]
    cases += [[rng.randint(-20, 20) for _ in range(rng.randint(2, 400))] for _ in range(25)]
    for xs in cases:
        p = write_input(xs)
        want, _ = run(original(), p)
        got, _ = run(candidate(), p)
        assert got.returncode == 0 and got.stdout == want.stdout, f"differs on {xs[:20]}..."


def test_big_input_matches_reference():
    got, _ = cached_run("cand_big", candidate(), SRC + "/data/big.txt", limit=10)
    assert got.returncode == 0, got.stderr[-200:]
    xs = [int(v) for v in open(SRC + "/data/big.txt").read().split()[1:]]
    assert got.stdout == reference(xs), got.stdout


def test_sample_five_times_less_cpu():
    _, base = cached_run("orig_sample", original(), SRC + "/data/sample.txt")
    _, cpu = cached_run("cand_sample", candidate(), SRC + "/data/sample.txt")
    assert cpu <= base / 5, f"{cpu:.3f}s CPU vs original {base:.3f}s (need <= 1/5)"


def test_big_input_cpu_budget():
    got, cpu = cached_run("cand_big", candidate(), SRC + "/data/big.txt", limit=10)
    assert got.returncode == 0, "did not finish"
    assert cpu <= 1.0, f"{cpu:.3f}s CPU on big.txt"
