#!/bin/bash
# Topological order of the configured hooks under the documented dependencies. A dependency
# name that spells a configured hook's words in another order (load_modules / module_load)
# is that hook; a documented hook that is not configured passes its prerequisites on to the
# hooks that require it. Ties are broken by boot phase (drivers, udev, block layers, fsck,
# mounts, network, applications), then by the current order.
cd /tmp
python3 - <<'PY'
import heapq
import re

D = "/tmp/initramfs_docs/"
hooks = [l.strip() for l in open(D + "current_hooks.txt") if l.strip()]
key = lambda n: tuple(sorted(n.lower().split("_")))
by_key = {key(h): h for h in hooks}
canon = lambda n: by_key.get(key(n), n)

deps = {}
for line in open(D + "hook_dependencies.txt"):
    m = re.match(r"\s*([\w.-]+)\s*:\s*requires\s*(.*)$", line)
    if not m:
        continue
    name = canon(m.group(1))
    reqs = [canon(r.strip()) for r in m.group(2).split(",") if r.strip()]
    deps.setdefault(name, set()).update(reqs)

configured = set(hooks)


def resolved(name, seen=()):
    """Configured prerequisites of `name`, looking through hooks that are not configured."""
    out = set()
    for r in deps.get(name, ()):
        if r in seen:
            continue
        if r in configured:
            out.add(r)
        else:
            out |= resolved(r, seen + (r,))
    return out


req = {h: resolved(h, (h,)) for h in hooks}

PHASES = [("module", "driver"), ("udev_trigger",), ("udev",), ("device_mapper",),
          ("mdadm", "lvm", "crypt"), ("check", "fsck"), ("root",), ("mount",),
          ("network",), ("application",)]


def phase(h):
    for i, words in enumerate(PHASES):
        if any(w in h for w in words):
            return i
    return len(PHASES)


indeg = {h: len(req[h]) for h in hooks}
users = {h: [u for u in hooks if h in req[u]] for h in hooks}
heap = [(phase(h), hooks.index(h), h) for h in hooks if indeg[h] == 0]
heapq.heapify(heap)
order = []
while heap:
    _, _, h = heapq.heappop(heap)
    order.append(h)
    for u in users[h]:
        indeg[u] -= 1
        if indeg[u] == 0:
            heapq.heappush(heap, (phase(u), hooks.index(u), u))
if len(order) != len(hooks):
    raise SystemExit("dependency cycle among: %s" % sorted(set(hooks) - set(order)))
open("/tmp/hook_order.txt", "w").write("\n".join(order) + "\n")
print("\n".join(order))
PY
