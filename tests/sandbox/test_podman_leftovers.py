"""What a private Podman service leaves behind. Podman 4.3 leaves a copy of every tar imported
through the API (`api_load.tar*`, one per base image, hundreds of MB) in its TMPDIR; before,
that was /var/tmp, and a day of test runs filled the disk. Each service now has a scratch
directory of its own, removed when it stops or, after a crash, by the next start. A service
killed before its `stop` left its containers (mounts and storage) for good; the next start
removes them."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from sandbox.podman import Scratch, sweep_scratch
from tests.sandbox.conftest import unmount_under

ROOT = Path(__file__).resolve().parents[2]


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_the_sweep_removes_only_scratch_whose_owner_is_gone(tmp_path):
    held = Scratch.take(tmp_path, "held")
    taken_by_child = subprocess.run(
        [sys.executable, "-c", "import sys; from pathlib import Path; from sandbox.podman "
         "import Scratch; print(Scratch.take(Path(sys.argv[1]), 'dead').path)", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    dead, young = Path(taken_by_child), tmp_path / "young-unlocked"
    young.mkdir()
    unlocked = tmp_path / "old-unlocked"
    unlocked.mkdir()
    for path in (held.path, dead, unlocked):
        (path / "api_load.tar1").write_bytes(b"x")
        _age(path, 3600)
    try:
        removed = sweep_scratch(tmp_path)
        assert sorted(removed) == sorted([dead, unlocked])
        assert held.path.is_dir() and young.is_dir()
        assert not dead.exists() and not unlocked.exists()
    finally:
        held.release()
    assert not held.path.exists()


@pytest.mark.sandbox
def test_an_imported_base_leaves_no_copy_behind(tmp_path):
    from sandbox.base import SandboxUnavailable
    from sandbox.podman import PodmanService, import_base, podman_problem, write_config

    if podman_problem() is not None:
        pytest.skip(f"no container engine: {podman_problem()}")
    shared = {d: set(glob.glob(f"{d}/api_load.tar*")) for d in ("/var/tmp", tempfile.gettempdir())}
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    (rootfs / "etc" / "marker").write_bytes(os.urandom(1 << 20))
    config = write_config(tmp_path / "engine")
    service = PodmanService(config, name="scratch")
    try:
        try:
            service.start()
        except SandboxUnavailable as e:
            pytest.skip(f"no container engine: {e}")
        client = service.client()
        import_base(client, "t1-test/scratch:1", rootfs, "k1")
        client.close()
        kept = list((config.root / "scratch").glob("*/api_load.tar*"))
        assert [p.stat().st_size > 1 << 20 for p in kept] == [True], "the copy is the service's"
    finally:
        service.stop()
        unmount_under(tmp_path)
    assert list((config.root / "scratch").iterdir()) == []
    for d, before in shared.items():
        assert set(glob.glob(f"{d}/api_load.tar*")) - before == set(), d


@pytest.mark.sandbox
def test_a_killed_services_containers_are_removed_by_the_next_start(tmp_path):
    """A service killed before its `stop` (a runner killed with SIGKILL) leaves its containers,
    each holding its mounts and storage; the next service of the installation removes them,
    and never those of a service that still answers."""
    import signal

    from sandbox.base import SandboxUnavailable
    from sandbox.podman import (
        CONTAINER_LABEL,
        ENDPOINT_LABEL,
        PodmanService,
        import_base,
        podman_problem,
        write_config,
    )

    if podman_problem() is not None:
        pytest.skip(f"no container engine: {podman_problem()}")
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    config = write_config(tmp_path / "engine")
    killed, live, later = (PodmanService(config, name=n) for n in ("killed", "live", "later"))
    try:
        try:
            killed.start()
            live.start()
        except SandboxUnavailable as e:
            pytest.skip(f"no container engine: {e}")
        ids = {}
        for service in (killed, live):
            client = service.client()
            import_base(client, "t1-test/orphans:1", rootfs, "k1")
            labels = {CONTAINER_LABEL: "t1-test", ENDPOINT_LABEL: service.docker_host}
            ids[service] = client.containers.create("t1-test/orphans:1", ["/x"], labels=labels).id
            client.close()
        assert killed._proc is not None
        os.killpg(killed._proc.pid, signal.SIGKILL)  # no stop: its socket file stays
        killed._proc.wait()
        assert killed.socket.exists()
        later.start()
        client = later.client()
        left = {c.id for c in client.containers.list(all=True)}
        client.close()
        assert ids[killed] not in left and ids[live] in left
    finally:
        for service in (later, live, killed):
            service.stop()
        unmount_under(tmp_path)


class _Busy:
    """A container the engine answers 500 for `busy` times ("device or resource busy" on its
    /dev/shm, as Podman does under load), then removes; with `removed_anyway` the first 500
    came after removing it (Podman's case: the next try finds nothing); or one gone before."""

    def __init__(self, busy: int, gone: bool = False, removed_anyway: bool = False) -> None:
        self.busy, self.gone, self.removed_anyway, self.calls = busy, gone, removed_anyway, 0

    def remove(self, force: bool = False) -> None:
        from docker.errors import APIError, NotFound

        assert force
        self.calls += 1
        if self.gone:
            raise NotFound("no such container")
        if self.calls <= self.busy:
            self.gone = self.removed_anyway
            raise APIError("removing container root filesystem: device or resource busy")


def test_a_container_the_engine_is_still_unmounting_is_removed_on_a_later_try():
    from sandbox.docker_api import force_remove

    busy = _Busy(busy=2)
    assert force_remove(busy, pause=0.01) is True and busy.calls == 3
    answered_500 = _Busy(busy=1, removed_anyway=True)
    assert force_remove(answered_500, pause=0.01) is True and answered_500.calls == 2
    gone = _Busy(busy=0, gone=True)
    assert force_remove(gone, pause=0.01) is False and gone.calls == 1


def test_a_container_the_engine_never_removes_raises_its_last_error():
    from docker.errors import APIError

    from sandbox.docker_api import force_remove

    stuck = _Busy(busy=10)
    with pytest.raises(APIError, match="busy"):
        force_remove(stuck, tries=3, pause=0.01)
    assert stuck.calls == 3
