import os
import random
import resource
import subprocess
import tempfile
from collections import Counter

SCRIPT = "/app/bin/tally.sh"
# The shipped (slow) script, kept verbatim so the checks can compare against it.
ORIGINAL = '#!/bin/bash\n# tally.sh LOG - summarise an access log in common log format:\n#   IP - - [date] "METHOD PATH PROTO" STATUS SIZE\n# Output:\n#   requests <number of non-empty lines>\n#   status <code> <count>       one line per status code, ascending by code\n#   top <ip> <count>            the 5 most frequent IPs, by count desc, then IP ascending\n#   bytes <sum of SIZE, where "-" counts as 0>\nexport LC_ALL=C\nlog=$1\ntmp=$(mktemp -d)\ntotal=0\nbytes=0\nwhile IFS= read -r line; do\n  [ -z "$line" ] && continue\n  ip=$(echo "$line" | cut -d\' \' -f1)\n  status=$(echo "$line" | awk \'{print $9}\')\n  size=$(echo "$line" | awk \'{print $10}\')\n  [ "$size" = "-" ] && size=0\n  total=$((total + 1))\n  bytes=$((bytes + size))\n  echo "$ip" >> "$tmp/ips"\n  echo "$status" >> "$tmp/statuses"\ndone < "$log"\necho "requests $total"\nsort "$tmp/statuses" | uniq -c | awk \'{print "status", $2, $1}\' | sort -k2,2n\nsort "$tmp/ips" | uniq -c | awk \'{print "top", $2, $1}\' | sort -k3,3nr -k2,2 | head -5\necho "bytes $bytes"\nrm -rf "$tmp"\n'
_CACHE = {}


def original_path():
    if "orig" not in _CACHE:
        fd, p = tempfile.mkstemp(suffix=".sh")
        with os.fdopen(fd, "w") as f:
            f.write(ORIGINAL)
        _CACHE["orig"] = p
    return _CACHE["orig"]


def timed(script, log, limit=120):
    """Run `bash script log`; returns (CompletedProcess, CPU seconds incl. children).
    A run over `limit` wall seconds is killed (whole process group) and reported as failed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.Popen(["bash", script, log], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, err = p.communicate()
        err = b"killed after %d s" % limit
        p.returncode = -9
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    return r, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cached(key, script, log, limit=120):
    if key not in _CACHE:
        _CACHE[key] = timed(script, log, limit)
    return _CACHE[key]


def reference(path):
    lines = [l for l in open(path, "rb").read().split(b"\n") if l != b""]
    st, ip, total = Counter(), Counter(), 0
    for l in lines:
        f = l.split()
        st[f[8]] += 1
        ip[f[0]] += 1
        total += 0 if f[9] == b"-" else int(f[9])
    out = [b"requests %d" % len(lines)]
    out += [b"status %s %d" % (s, st[s]) for s in sorted(st, key=int)]
    out += [b"top %s %d" % (i, c) for i, c in sorted(ip.items(), key=lambda kv: (-kv[1], kv[0]))[:5]]
    out.append(b"bytes %d" % total)
    return b"\n".join(out) + b"\n"


def test_sample_output_identical():
    want, _ = cached("orig_sample", original_path(), "/app/logs/sample.log")
    got, _ = cached("new_sample", SCRIPT, "/app/logs/sample.log")
    assert got.returncode == 0, got.stderr[-300:]
    assert got.stdout == want.stdout, got.stdout[-300:]


def test_generated_logs_identical():
    rng = random.Random(7)
    for k in range(3):
        lines = []
        for _ in range(25):
            if rng.random() < 0.1:
                lines.append("")
                continue
            size = rng.choice(["-", str(rng.randint(0, 999))])
            lines.append(f'10.0.0.{rng.randint(1, 12)} - - [x] "GET / HTTP/1.1" {rng.choice([200, 404, 503])} {size}')
        fd, p = tempfile.mkstemp(suffix=".log")
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(lines) + "\n")
        want = subprocess.run(["bash", original_path(), p], capture_output=True).stdout
        got = subprocess.run(["bash", SCRIPT, p], capture_output=True)
        assert got.returncode == 0 and got.stdout == want, f"generated log #{k}: output differs"


def test_full_log_matches_reference():
    got, _ = cached("new_full", SCRIPT, "/app/logs/access.log", limit=10)
    assert got.returncode == 0, got.stderr[-300:]
    assert got.stdout == reference("/app/logs/access.log"), got.stdout[-400:]


def test_sample_five_times_less_cpu():
    _, base = cached("orig_sample", original_path(), "/app/logs/sample.log")
    _, cpu = cached("new_sample", SCRIPT, "/app/logs/sample.log")
    assert cpu <= base / 5, f"{cpu:.3f}s CPU vs original {base:.3f}s (need <= 1/5)"


def test_full_log_cpu_budget():
    got, cpu = cached("new_full", SCRIPT, "/app/logs/access.log", limit=10)
    assert got.returncode == 0, got.stderr[-300:]
    assert cpu <= 2.0, f"{cpu:.3f}s CPU on access.log"


def test_script_executable():
    assert os.access(SCRIPT, os.X_OK)
