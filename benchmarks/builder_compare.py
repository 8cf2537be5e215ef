"""Our Dockerfile builder against buildah: build time and the per-trial cost of the result.

    T1_SANDBOX_STATE=/tmp/x python benchmarks/builder_compare.py DIR --sample 5 --seed 0
                                     [--buildah-root /tmp/x-buildah]

For each sampled task (run as root; buildah runs with runc, overlay storage under
--buildah-root, never pulling: the task's FROM is our own offline base root imported once):
  ours cold   sandbox.build.build_image with an empty layer cache (the base root kept)
  ours warm   the same again (every layer cached)
  bh cold     `buildah bud --layers` after removing every image but the imported base
  bh warm     the same again (cached layers)
  trial       what one trial pays to get the image as a lower layer, median of 3.
              ours: build_image on the warm cache (what LocalBackend.open calls): layer paths.
              bh: `buildah from` + `buildah mount` (a merged overlay to stack under the
              sandbox), then `buildah umount` + `buildah rm`; and `podman image mount` +
              `unmount` on the same storage (no container).
RUN steps of both builders reach the network through the same user-mode NAT with the
package-registry policy (sandbox.egress.UserNat), and see the host CA bundle (ours: the build
CA layer; buildah: a build secret, as sandbox.docker_build does for Podman). Prints one row
per task and the medians; a build that fails prints its reason. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

os.environ.setdefault("T1_PULL_IMAGES", "never")

from sandbox.base import NetworkMode, NetworkPolicy  # noqa: E402
from sandbox.bases import state_dir  # noqa: E402
from sandbox.build import base_image, build_image, default_runner, dockerfile_of  # noqa: E402
from sandbox.docker_build import (  # noqa: E402
    CA_SECRET_ID,
    build_ca_bundle,
    dockerfile_bases,
    with_build_ca,
)
from sandbox.egress import UserNat  # noqa: E402
from sandbox.image import Image  # noqa: E402
from sandbox.launcher import helper_path  # noqa: E402
from tasks.corpus import import_dir  # noqa: E402
from tasks.model import Task  # noqa: E402

COLS = ("ours cold", "ours warm", "bh cold", "bh warm", "trial ours", "trial bh", "trial pm")


class Buildah:
    """buildah (and podman for `image mount`) on private containers storage."""

    def __init__(self, root: Path) -> None:
        self.store = ["--root", str(root / "storage"), "--runroot", str(root / "run"),
                      "--storage-driver", "overlay"]  # fmt: skip
        self.root = root

    def __call__(self, *args: str, tool: str = "buildah", **kw) -> str:
        p = subprocess.run([tool, *self.store, *args], capture_output=True, text=True, **kw)
        if p.returncode != 0:
            raise RuntimeError(f"{tool} {args[0]}: {(p.stderr or p.stdout)[-600:]}")
        return p.stdout.strip()

    def import_base(self, name: str, image: Image) -> None:
        """Our base root (one layer) as image `name`, with its config; once."""
        if name in self("images", "--format", "{{.Name}}:{{.Tag}}").split():
            return
        ctr = self("from", "scratch")
        mnt = self("mount", ctr)
        subprocess.run(["cp", "-a", f"{image.layers[0]}/.", mnt], check=True)
        cfg = image.config
        args = [f"--env={k}={v}" for k, v in cfg.env.items()]
        args += [f"--workingdir={cfg.workdir}", f"--user={cfg.user or '0'}"]
        if cfg.cmd:
            args.append(f"--cmd={' '.join(cfg.cmd)}")
        self("config", *args, ctr)
        self("commit", "--rm", ctr, name)

    def clear(self, keep: set[str]) -> None:
        """Every container and every image but `keep` (the bases) removed: a cold cache."""
        self("rm", "--all")
        for line in self("images", "--all", "--format", "{{.ID}} {{.Name}}:{{.Tag}}").split("\n"):
            if line and line.split()[1] not in keep:
                subprocess.run(["buildah", *self.store, "rmi", "-f", line.split()[0]],
                               capture_output=True)  # fmt: skip

    def bud(self, task: Task, tag: str, ctx: Path) -> float:
        net = UserNat(NetworkPolicy(NetworkMode.BUILD))
        with net:
            t0 = time.monotonic()
            self("bud", "--layers", "--pull-never", "--runtime", "runc", "--isolation", "oci",
                 "--network", net.netns, *[f"--dns={s}" for s in net.nameservers()],
                 "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=1000:1000",
                 "--secret", f"id={CA_SECRET_ID},src={ctx / '.t1-ca.crt'}",
                 "-t", tag, "-f", str(ctx / "Dockerfile"), str(ctx),
                 timeout=task.limits.build_timeout_s)  # fmt: skip
            return time.monotonic() - t0


def context_dir(task: Task, into: Path) -> Path:
    """The build context as buildah reads it: the environment's files, the Dockerfile with
    the build CA as a secret, the CA bundle beside it."""
    shutil.rmtree(into, ignore_errors=True)
    for rel, data in task.environment.files.items():
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        (into / rel).write_bytes(data)
    (into / "Dockerfile").write_text(with_build_ca(dockerfile_of(task)))
    (into / ".t1-ca.crt").write_bytes(build_ca_bundle() or b"")
    return into


def timed(fn) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def trial_costs(bh: Buildah, task: Task, runner, tag: str) -> tuple[float, float, float]:
    def bh_lower() -> None:
        ctr = bh("from", "--pull-never", tag)
        bh("mount", ctr)
        bh("umount", ctr)
        bh("rm", ctr)

    def pm_lower() -> None:
        bh("image", "mount", tag, tool="podman")
        bh("image", "unmount", tag, tool="podman")

    ours = statistics.median(timed(lambda: build_image(task, runner)) for _ in range(3))
    return (
        ours,
        statistics.median(timed(bh_lower) for _ in range(3)),
        statistics.median(timed(pm_lower) for _ in range(3)),
    )


def compare(task: Task, bh: Buildah, runner, scratch: Path, ours_first: bool) -> list[float]:
    """The row for one task; the builders take turns going first (downloads may be cached
    upstream, so whoever goes second could be favoured)."""
    names = dockerfile_bases(dockerfile_of(task))
    for name in names:
        bh.import_base(name, base_image(name))
    tag = "localhost/t1-compare:" + task.environment_hash[:16]

    def ours() -> list[float]:
        shutil.rmtree(state_dir() / "l", ignore_errors=True)  # only the bases remain
        return [timed(lambda: build_image(task, runner)) for _ in range(2)]

    def theirs() -> list[float]:
        bh.clear(keep=set(names))
        ctx = context_dir(task, scratch / "ctx")
        return [bh.bud(task, tag, ctx) for _ in range(2)]

    if ours_first:
        o = ours()
        b = theirs()
    else:
        b = theirs()
        o = ours()
    return [*o, *b, *trial_costs(bh, task, runner, tag)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--sample", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--buildah-root", type=Path, default=state_dir() / "buildah")
    args = ap.parse_args()

    tasks, _rejects = import_dir(args.dir)
    sample = random.Random(args.seed).sample(tasks, min(args.sample, len(tasks)))
    bh = Buildah(args.buildah_root)
    runner = default_runner()
    helper_path(str(state_dir()))  # compiled once, outside the timings
    rows: list[list[float]] = []
    print(f"{'task':<44}" + "".join(f"{c:>11}" for c in COLS) + "   (seconds)")
    with tempfile.TemporaryDirectory(dir=args.buildah_root.parent) as scratch:
        for i, task in enumerate(sample):
            try:
                row = compare(task, bh, runner, Path(scratch), ours_first=i % 2 == 0)
            except Exception as e:  # noqa: BLE001 - a failed build is a row, not the end
                print(f"{task.id[:43]:<44}FAILED {str(e).splitlines()[0][:150]}", flush=True)
                continue
            rows.append(row)
            print(f"{task.id[:43]:<44}" + "".join(f"{v:>11.3f}" for v in row), flush=True)
    if rows:
        med = [statistics.median(col) for col in zip(*rows, strict=True)]
        print(
            f"{'median (' + str(len(rows)) + ' tasks)':<44}" + "".join(f"{v:>11.3f}" for v in med)
        )


if __name__ == "__main__":
    main()
