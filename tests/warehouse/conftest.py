"""Fixtures for the warehouse tests: tiny synthetic tasks and a hand-built lineage graph.

The repository root is put on sys.path (and on PYTHONPATH for subprocesses) because the
editable install's module map may predate the `warehouse` package.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tasks.model import Category, Lineage, Task  # noqa: E402


def make_task(
    task_id: str,
    *,
    parents: tuple[Task, ...] = (),
    round: int = 0,
    operator: str | None = None,
    family: str | None = None,
    root_seed: str | None = None,
    extra_parent_hashes: tuple[str, ...] = (),
    category: Category = Category.SCRIPTING_AUTOMATION,
    payload: bytes = b"",
    solution: bool = True,
) -> Task:
    """A small valid task whose lineage names `parents` by content hash."""
    return Task(
        id=task_id,
        name=f"Task {task_id}",
        instruction=f"Do the thing called {task_id}.\n",
        category=category,
        solution={"solve.sh": b"#!/bin/bash\n# solve\necho one\necho two\n\necho three\n"}
        if solution
        else None,
        verifier={"test.sh": b"#!/bin/bash\nexit 0\n", "data.bin": payload},
        lineage=Lineage(
            parents=[p.content_hash for p in parents] + list(extra_parent_hashes),
            root_seed=root_seed,
            round=round,
            operator=operator,
            family=family,
            source_pool="seed" if not parents and not extra_parent_hashes else "rst",
        ),
    )


class Graph:
    """The hand-built lineage DAG used by the lineage tests (see test_lineage.py's docstring)."""

    def __init__(self) -> None:
        self.S1 = make_task("s1")
        self.S2 = make_task("s2")
        s1, s2 = self.S1.content_hash, self.S2.content_hash
        self.A = make_task(
            "a", parents=(self.S1,), round=1, operator="mutate", family="git", root_seed=s1
        )
        self.B = make_task(
            "b", parents=(self.S1,), round=1, operator="harden", family="git", root_seed=s1
        )
        self.C = make_task(
            "c", parents=(self.S2,), round=1, operator="mutate", family="text", root_seed=s2
        )
        self.D = make_task(
            "d", parents=(self.A,), round=2, operator="compose", family="git", root_seed=s1
        )
        self.E = make_task(
            "e",
            parents=(self.A, self.C),
            round=2,
            operator="crossover",
            family="mixed",
            root_seed=s1,
        )
        self.G = make_task(
            "g", parents=(self.B,), round=2, operator="mutate", family="git", root_seed=s1
        )
        self.F = make_task(
            "f",
            parents=(self.D, self.E),
            round=3,
            operator="crossover",
            family="mixed",
            root_seed=s1,
        )
        self.K = make_task(
            "k", parents=(self.D, self.S1), round=3, operator="compose", family="git", root_seed=s1
        )
        self.missing = "f" * 64
        self.H = make_task(
            "h", extra_parent_hashes=(self.missing,), round=1, operator="mutate", family="text"
        )

    @property
    def tasks(self) -> list[Task]:
        return [
            self.S1,
            self.S2,
            self.A,
            self.B,
            self.C,
            self.D,
            self.E,
            self.G,
            self.F,
            self.K,
            self.H,
        ]

    def id_of(self, content_hash: str) -> str:
        return next(t.id for t in self.tasks if t.content_hash == content_hash)


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh store location; subprocesses find the repository through PYTHONPATH."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.delenv("T1_WAREHOUSE", raising=False)
    return tmp_path / "store"


@pytest.fixture(scope="module")
def graph() -> Graph:
    return Graph()


@pytest.fixture(scope="session")
def task_factory():
    """`make_task` for tests (conftest modules are not importable by name here)."""
    return make_task


class S3Endpoint:
    """A moto S3 server on loopback: its URL, and the environment a client needs for it."""

    def __init__(self, url: str) -> None:
        self.url = url

    def env(self) -> dict[str, str]:
        return {
            "T1_S3_ENDPOINT": self.url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def make_bucket(self, name: str) -> str:
        """Create bucket `name` (through the store's own client library); returns `s3://name`."""
        import s3fs

        fs = s3fs.S3FileSystem(
            endpoint_url=self.url, skip_instance_cache=True, key="testing", secret="testing"
        )
        fs.call_s3("create_bucket", Bucket=name)
        return f"s3://{name}"


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 in server mode on 127.0.0.1 (a free port), for the session.

    moto checks a conditional put's precondition and then stores the object in two steps, and
    its server runs each request in a thread, so two racing `If-None-Match: *` puts could both
    pass; S3 itself makes the pair atomic. The WSGI app is therefore called under one lock (one
    request at a time, as moto's own single-threaded mode would), which is the guarantee the
    commit protocol relies on, and nothing more.
    """
    import threading

    pytest.importorskip(
        "moto", reason="the moto S3 server is not installed (pip install moto[server])"
    )
    pytest.importorskip("s3fs", reason="s3fs is not installed")
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import WSGIRequestHandler, make_server

    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    def serialized(environ, start_response):
        with lock:
            return list(app(environ, start_response))

    class Quiet(WSGIRequestHandler):
        def log_request(self, *args, **kwargs) -> None:  # one line per request otherwise
            pass

    server = make_server("127.0.0.1", 0, serialized, threaded=True, request_handler=Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield S3Endpoint(f"http://{host}:{port}")
    finally:
        server.shutdown()
        thread.join(timeout=10)


@pytest.fixture
def s3_store_url(
    s3_server: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> str:
    """`s3://<fresh bucket>/wh`, with this process's S3 environment and cache set for it."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("T1_WAREHOUSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.delenv("T1_WAREHOUSE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    bucket = "t1-" + uuid.uuid4().hex[:12]
    return s3_server.make_bucket(bucket) + "/wh"
