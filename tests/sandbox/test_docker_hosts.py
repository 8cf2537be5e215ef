"""Several Docker-API engines as one docker backend (sandbox.docker_hosts): the
`T1_DOCKER_HOSTS` syntax (per-engine TLS), placement by free slots and image affinity (pure),
online tasks kept off engines on other machines, a batch over two private Podman services
with separate storage roots, one of them stopped mid-batch, and a batch over two reached over
tcp:// with TLS, each with its own CA."""

from __future__ import annotations

import concurrent.futures as cf
import shutil
import threading
import time

import pytest

from sandbox.base import SandboxError
from sandbox.docker_api import EngineTLS
from sandbox.docker_hosts import EnginePool, EngineSpec, configured_pool, parse_hosts
from tasks.model import Task
from tasks.results import FailureMode
from tests.sandbox.conftest import unmount_under


def pool(n: int = 3, slots: int = 2) -> EnginePool:
    specs = [EngineSpec(f"unix:///e{i}.sock") for i in range(n)]
    return EnginePool(specs, slots, connect=lambda spec: spec.url)


def test_parse_hosts():
    assert parse_hosts(" tcp://a:2376, ssh://u@b ,,tcp://a:2376") == [
        EngineSpec("tcp://a:2376"),
        EngineSpec("ssh://u@b"),
    ]


def test_parse_hosts_per_engine_tls():
    hosts = (
        "tcp://h1:2376?cert_path=/etc/t1/h1, tcp://h2:2376?cert_path=/etc/t1/h2&tls_verify=0,"
        "tcp://h3:2376, unix:///run/p.sock"
    )
    assert parse_hosts(hosts) == [
        EngineSpec("tcp://h1:2376", EngineTLS("/etc/t1/h1", verify=True)),
        EngineSpec("tcp://h2:2376", EngineTLS("/etc/t1/h2", verify=False)),
        EngineSpec("tcp://h3:2376"),  # the global DOCKER_TLS_VERIFY / DOCKER_CERT_PATH
        EngineSpec("unix:///run/p.sock"),
    ]
    assert EngineTLS("/c", verify=False).env == {"DOCKER_CERT_PATH": "/c", "DOCKER_TLS_VERIFY": ""}


@pytest.mark.parametrize(
    "entry",
    [
        "h1:2376",  # no scheme
        "tcp://h1:2376?cert_path=",
        "tcp://h1:2376?tls_verify=1",  # verify against which CA?
        "tcp://h1:2376?cert_path=certs/h1",
        "tcp://h1:2376?cert_path=/c&tls_verify=yes",
        "tcp://h1:2376?cert=/c",
        "tcp://h1:2376?cert_path=/a&cert_path=/b",
        "unix:///run/p.sock?cert_path=/c",
        "ssh://u@h1?cert_path=/c",
    ],
)
def test_a_malformed_entry_is_a_one_line_error_naming_it(entry):
    with pytest.raises(ValueError) as e:
        parse_hosts(f"unix:///ok.sock,{entry}")
    message = str(e.value)
    assert message.startswith(f"T1_DOCKER_HOSTS: entry {entry!r}: ") and "\n" not in message


def test_one_engine_listed_twice_with_different_tls_is_an_error():
    with pytest.raises(ValueError, match="T1_DOCKER_HOSTS: tcp://h1:2376 listed twice"):
        parse_hosts("tcp://h1:2376?cert_path=/a,tcp://h1:2376?cert_path=/b")


def test_missing_tls_files_name_the_engine_and_the_directory(tmp_path):
    from sandbox.base import SandboxUnavailable
    from sandbox.docker_api import docker_client

    (tmp_path / "ca.pem").write_text("")
    with pytest.raises(SandboxUnavailable, match=f"tcp://h1:2376: cert_path {tmp_path} lacks cert"):
        docker_client("tcp://h1:2376", EngineTLS(str(tmp_path)))


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("unix:///run/podman.sock", True),
        ("tcp://127.0.0.1:2376", True),
        ("tcp://127.0.0.2:2376", True),
        ("tcp://localhost:2376", True),
        ("tcp://[::1]:2376", True),
        ("tcp://10.0.0.5:2376", False),
        ("tcp://h1:2376", False),
        ("ssh://u@h1", False),
    ],
)
def test_engines_on_this_machine(url, local):
    assert EngineSpec(url).local is local


def online(where: str = "agent") -> Task:
    """A task whose agent phase (or only its verifier phase) has the internet."""
    from tasks.model import EnvironmentSpec, NetworkAccess, PhaseConfig
    from tests.factories import make_task

    if where == "agent":
        return make_task("online", environment=EnvironmentSpec(allow_network=True))
    task = make_task("online-verifier")
    return task.model_copy(
        update={"verifier_config": PhaseConfig(network_mode=NetworkAccess.PUBLIC)}
    )


@pytest.fixture
def tried(monkeypatch) -> list[str]:
    """The engines the pool tries to connect to, none of which answers."""
    from sandbox import docker_hosts
    from sandbox.base import SandboxUnavailable

    urls: list[str] = []

    def connect(spec: EngineSpec) -> object:
        urls.append(spec.url)
        raise SandboxUnavailable("unreachable")

    monkeypatch.setattr(docker_hosts, "_connect", connect)
    return urls


@pytest.mark.parametrize("where", ["agent", "verifier"])
def test_an_online_task_is_refused_up_front_where_no_engine_is_on_this_machine(
    monkeypatch, where, tried
):
    """Regression: egress is set up with nsenter on this machine, so such a task used to fail
    at its container's start on a remote engine (its verifier's: after the agent had run)."""
    from sandbox import get_backend, run_trial
    from sandbox.base import SandboxUnavailable

    monkeypatch.setenv("T1_DOCKER_HOSTS", "tcp://h1:2376,ssh://u@h2")
    task = online(where)
    with pytest.raises(SandboxUnavailable) as e:
        get_backend("docker").open(task)
    assert str(e.value) == (
        f"task {task.id}: network policy 'internet' needs an engine on this machine (unix://, "
        "or tcp:// to localhost) to set up its egress; T1_DOCKER_HOSTS=tcp://h1:2376,ssh://u@h2 "
        "has none"
    )
    assert tried == [], "refused before any engine was asked"
    r = run_trial(task, "oracle", "docker")  # the trial's row: an infrastructure failure
    assert r.failure_mode == FailureMode.SANDBOX_ERROR and not r.rewardable
    assert r.failure_mode.infrastructure and "has none" in r.failure_detail
    monkeypatch.delenv("T1_DOCKER_HOSTS")
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.5:2376")  # one engine, no pool
    with pytest.raises(SandboxUnavailable, match="DOCKER_HOST=tcp://10.0.0.5:2376 has none"):
        get_backend("docker").open(task)


def test_an_online_task_goes_to_an_engine_on_this_machine(monkeypatch, tried):
    from sandbox import get_backend

    monkeypatch.setenv("T1_DOCKER_HOSTS", "tcp://h1:2376,unix:///run/none.sock,tcp://h2:2376")
    with pytest.raises(SandboxError, match="no engine of T1_DOCKER_HOSTS answers"):
        get_backend("docker").open(online())
    assert tried == ["unix:///run/none.sock"]
    p = pool(2)
    remote = EngineSpec("tcp://h1:2376")
    p.engines[0].spec, p.engines[0].images = remote, {"img"}  # affinity and free slots
    assert p.choose("img", 0.0) is p.engines[0]
    assert p.choose("img", 0.0, local_only=True) is p.engines[1]


def test_placement_prefers_free_slots_then_the_engine_holding_the_image():
    p = pool()
    e0, e1, e2 = p.engines
    e1.images.add("img")
    assert p.choose("img", 0.0) is e1  # affinity
    e1.live = e1.slots  # full: affinity never overfills an engine
    assert p.choose("img", 0.0) in (e0, e2)
    e0.live = 1
    assert p.choose("other", 0.0) is e2  # the most free slots
    e0.live = e2.live = 2
    assert p.choose("other", 0.0) is None


def test_an_engine_that_does_not_answer_is_out_of_the_rotation():
    p = pool(2, slots=1)
    first = p.acquire("x")
    p.mark_down(first, "refused")
    p.release(first)
    second = p.acquire("x")
    assert second is not first
    p.release(second)
    p.mark_down(second, "refused")
    with pytest.raises(Exception, match="no engine of T1_DOCKER_HOSTS answers"):
        p.acquire("x", timeout_s=1)


def test_acquire_waits_for_a_free_slot():
    p = pool(1, slots=1)
    held = p.acquire("x")
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(p.acquire("x", timeout_s=10)))
    t.start()
    time.sleep(0.3)
    assert not got
    p.release(held)
    t.join(5)
    assert got == [held]


def test_pool_from_the_environment(monkeypatch):
    monkeypatch.delenv("T1_DOCKER_HOSTS", raising=False)
    assert configured_pool() is None
    monkeypatch.setenv("T1_DOCKER_HOSTS", "unix:///a.sock,unix:///b.sock")
    monkeypatch.setenv("T1_DOCKER_SLOTS", "3")
    p = configured_pool()
    assert p is not None and [e.slots for e in p.engines] == [3, 3]
    monkeypatch.setenv("T1_DOCKER_SLOTS", "zero")
    with pytest.raises(ValueError, match="T1_DOCKER_SLOTS"):
        configured_pool()


@pytest.mark.sandbox
def test_a_batch_over_two_engines_survives_losing_one(tmp_path, monkeypatch):
    """Two private Podman services, each with its own storage root: trials are spread over
    both (each builds the image it runs); one service is stopped mid-batch: every trial is
    either judged or an infrastructure failure (never a 0 reward), and the rest of the batch
    runs on the engine left."""
    from sandbox import run_trial
    from sandbox.base import SandboxUnavailable
    from sandbox.podman import PodmanService, podman_problem, write_config
    from tests.factories import make_task

    if podman_problem() is not None:
        pytest.skip(f"no container engine: {podman_problem()}")
    services = [
        PodmanService(write_config(tmp_path / f"engine{i}"), name=f"e{i}") for i in range(2)
    ]
    try:
        for s in services:
            s.start()
    except SandboxUnavailable as e:
        for s in services:
            s.stop()
        unmount_under(tmp_path)
        pytest.skip(f"no container engine: {e}")
    monkeypatch.setenv("T1_DOCKER_HOSTS", ",".join(s.docker_host for s in services))
    monkeypatch.setenv("T1_DOCKER_SLOTS", "1")
    try:
        p = configured_pool()
        assert p is not None
        task = make_task("multi-engine")
        with cf.ThreadPoolExecutor(2) as ex:
            first = list(ex.map(lambda _: run_trial(task, "oracle", "docker"), range(2)))
            assert all(r.resolved for r in first), [r.failure_detail for r in first]
            assert [e.placed for e in p.engines] == [1, 1], "one trial on each engine"
            services[1].stop()  # engine 1 goes away mid-batch
            rest = list(ex.map(lambda _: run_trial(task, "oracle", "docker"), range(4)))
        for r in rest:
            assert r.resolved or (r.failure_mode.infrastructure and not r.rewardable), (
                r.failure_mode,
                r.failure_detail,
            )
            assert r.failure_mode != FailureMode.NONE or r.resolved
        assert sum(r.resolved for r in rest) >= 3, [r.failure_detail for r in rest]
        assert p.engines[1].down_until > time.monotonic()  # out of the rotation
    finally:
        for s in services:
            s.stop()
        unmount_under(tmp_path)


@pytest.mark.sandbox
def test_a_batch_over_two_tls_engines_each_with_its_own_ca(tmp_path, monkeypatch):
    """Two private Podman services reached over tcp:// with TLS (tests/sandbox/tls_front.py),
    each with its own CA and client certificate: the global DOCKER_CERT_PATH (engine A's) is
    refused by engine B, B's own `cert_path` entry is what reaches it, and a batch of trials
    over both is judged."""
    from sandbox import run_trial
    from sandbox.base import SandboxUnavailable
    from sandbox.docker_api import docker_client
    from sandbox.podman import PodmanService, podman_problem, remove_containers, write_config
    from tests.factories import make_task
    from tests.sandbox.tls_front import TlsFront, write_engine_certs

    if podman_problem() is not None:
        pytest.skip(f"no container engine: {podman_problem()}")
    certs = [write_engine_certs(tmp_path / f"certs{i}", f"engine{i}") for i in range(2)]
    services = [
        PodmanService(write_config(tmp_path / f"engine{i}"), name=f"tls{i}") for i in range(2)
    ]
    fronts: list[TlsFront] = []
    try:
        for s, c in zip(services, certs, strict=True):
            s.start()
            fronts.append(TlsFront(c, s.socket))
            fronts[-1].start()
        a, b = (f.url for f in fronts)
        monkeypatch.setenv("DOCKER_CERT_PATH", str(certs[0]))  # the default: engine A's
        monkeypatch.setenv("DOCKER_TLS_VERIFY", "1")
        docker_client(a).close()
        with pytest.raises(SandboxUnavailable, match="certificate verify failed"):
            docker_client(b)  # B's certificate is not signed by A's CA
        mixed = tmp_path / "mixed"  # B's CA, A's client certificate: B refuses the client
        mixed.mkdir()
        (mixed / "ca.pem").write_bytes((certs[1] / "ca.pem").read_bytes())
        for name in ("cert.pem", "key.pem"):
            (mixed / name).write_bytes((certs[0] / name).read_bytes())
        with pytest.raises(SandboxUnavailable):
            docker_client(b, EngineTLS(str(mixed)))

        monkeypatch.setenv("T1_DOCKER_HOSTS", f"{a},{b}?cert_path={certs[1]}")
        monkeypatch.setenv("T1_DOCKER_SLOTS", "1")
        p = configured_pool()
        assert p is not None and p.engines[1].spec.tls == EngineTLS(str(certs[1]))
        task = make_task("tls-engines")
        with cf.ThreadPoolExecutor(2) as ex:
            results = list(ex.map(lambda _: run_trial(task, "oracle", "docker"), range(4)))
        assert all(r.resolved for r in results), [r.failure_detail for r in results]
        assert sum(e.placed for e in p.engines) == 4 and min(e.placed for e in p.engines) >= 1
        assert all(e.down_until == 0.0 for e in p.engines), [e.last_error for e in p.engines]
    finally:
        for s, f in zip(services, fronts, strict=False):  # fronts: those started
            try:
                remove_containers(s.client(timeout=30), f.url)
            except Exception:  # noqa: BLE001 - best effort; the service may not have started
                pass
        for s in services:
            s.stop()
        for f in fronts:
            f.stop()
        unmount_under(tmp_path)
        for s in services:
            shutil.rmtree(s.config.run_dir, ignore_errors=True)  # its tmpfs run state


def test_unshift_tar_gives_the_container_its_ids_back():
    """Podman's archive of a user-namespaced container carries the ids of the engine's machine
    in PAX headers; the upload into the verifier's container cannot map them."""
    import io
    import tarfile

    from sandbox.docker import unshift_tar
    from sandbox.idmap import BASE

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, uid in (("app", BASE), ("app/f", BASE + 1000), ("app/g", 7)):
            info = tarfile.TarInfo(name)
            info.uid = info.gid = uid
            info.size = 2
            tar.addfile(info, io.BytesIO(b"hi"))
    with tarfile.open(fileobj=io.BytesIO(unshift_tar(buf.getvalue()))) as tar:
        got = [(m.name, m.uid, m.gid, tar.extractfile(m).read()) for m in tar]  # type: ignore[union-attr]
    assert got == [("app", 0, 0, b"hi"), ("app/f", 1000, 1000, b"hi"), ("app/g", 7, 7, b"hi")]


@pytest.mark.sandbox
def test_a_podman_engine_on_another_machine_is_handed_nothing_of_this_one(tmp_path, monkeypatch):
    """A private Podman service reached through a TLS front on a non-loopback address of this
    machine, which the backend takes for another machine's engine. Regression: on Podman the
    backend bound this machine's catatonit into every container, gave the build a network
    namespace path and the containers a seccomp profile path of this machine, and read the
    agent's outputs from a mount path of this machine; a remote engine has none of them.
    The wire (what the front relays) shows none; the trial is still judged: the oracle
    passes, nop fails, the outputs reach the verifier through the engine's archive API."""
    from sandbox import run_trial
    from sandbox.base import SandboxUnavailable
    from sandbox.docker import IDLE_INIT
    from sandbox.docker_api import docker_client
    from sandbox.local import private_state_dir
    from sandbox.podman import PodmanService, podman_problem, remove_containers, write_config
    from tests.factories import make_task
    from tests.sandbox.tls_front import TlsFront, non_loopback_address, write_engine_certs

    if podman_problem() is not None:
        pytest.skip(f"no container engine: {podman_problem()}")
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    certs = write_engine_certs(tmp_path / "certs", "remote", (address,))
    service = PodmanService(write_config(tmp_path / "engine"), name="remote")
    front: TlsFront | None = None
    try:
        try:
            service.start()
        except SandboxUnavailable as e:
            pytest.skip(f"no container engine: {e}")
        front = TlsFront(certs, service.socket, address, record=True)
        front.start()
        monkeypatch.setenv("T1_DOCKER_HOSTS", f"{front.url}?cert_path={certs}")
        p = configured_pool()
        assert p is not None and not p.engines[0].spec.local
        task = make_task("remote-podman")
        oracle = run_trial(task, "oracle", "docker")
        assert oracle.resolved, oracle.failure_detail
        nop = run_trial(task, "nop", "docker")
        assert nop.failure_mode == FailureMode.NONE and not nop.resolved, nop.failure_detail

        sent = b"".join(front.requests)
        heads = [r.split(b"\r\n", 1)[0] for r in front.requests if b" HTTP/1.1\r\n" in r[:300]]
        creates = sent.split(b"POST /v1.41/containers/create")[1:]  # each with its body
        sandboxes = [r for r in creates if b'"t1-forge.sandbox": "t1-' in r]
        assert len(sandboxes) >= 4, heads  # agent and verifier containers of both trials
        for needle in (b"catatonit", IDLE_INIT.encode(), str(private_state_dir()).encode()):
            assert needle not in sent, needle
        assert not [h for h in heads if b"/mount" in h], "a mount path of the engine's machine"
        assert not [h for h in heads if h.startswith(b"POST") and b"nsoptions" in h]
        assert [h for h in heads if b"/archive?path=%2Fapp" in h and h.startswith(b"GET")]
        from sandbox.docker import PROFILE_VOLUME
        from sandbox.docker_hosts import engine_site

        client = docker_client(front.url, p.engines[0].spec.tls)
        assert engine_site(client).podman and not engine_site(client).here
        mountpoint = client.volumes.get(PROFILE_VOLUME).attrs["Mountpoint"]
        assert all(f"seccomp={mountpoint}/".encode() in c for c in sandboxes), "engine's path"
    finally:
        if front is not None:
            try:
                remove_containers(service.client(timeout=30), front.url)
            except Exception:  # noqa: BLE001 - best effort; the service may not have started
                pass
        service.stop()
        if front is not None:
            front.stop()
        unmount_under(tmp_path)
        shutil.rmtree(service.config.run_dir, ignore_errors=True)
