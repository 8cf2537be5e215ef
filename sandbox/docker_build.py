"""Images for the docker backend: the task's Dockerfile built as written by the engine.

Missing base images are imported from the offline bases (Podman); on Podman, RUN steps get
this machine's CA bundle as a build secret sent with the context (never in the image) and, on a
Podman on this machine, a user-mode NAT network with the host unreachable (elsewhere the
engine's own build network). `image_config` reads back what the runtime
honours (WORKDIR, ENV, USER). docs/sandbox.md, "The Docker backend", has the details.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
import time
from pathlib import Path
from typing import Any

from sandbox.base import EnvironmentBuildError, NetworkMode, NetworkPolicy, SandboxError
from sandbox.docker_hosts import EngineSite
from sandbox.image import DEFAULT_PATH, ImageConfig
from tasks.environment import render_dockerfile
from tasks.model import VERIFIER_VENV, Task

IMAGE_PREFIX = "t1-forge-env"
# Build-time CA bundle (a build secret, never in the image) and the variables pointing at it.
CA_SECRET_ID = "t1-ca"
CA_TARGET = "/run/secrets/t1-ca.crt"
CA_ENV = ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO")
CA_ENV_NODE = "NODE_EXTRA_CA_CERTS"


def _instructions(text: str) -> list[tuple[int, int, str]]:
    """(first line, last line, joined text) of each instruction; comments and blanks skipped."""
    escape = "\\"
    m = re.match(r"\s*#\s*escape\s*=\s*(\S)", text)
    if m:
        escape = m.group(1)
    lines = text.split("\n")
    out: list[tuple[int, int, str]] = []
    start, parts = -1, list[str]()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if start < 0:
            if not stripped or stripped.startswith("#"):
                continue
            start, parts = i, []
        elif stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith(escape):
            parts.append(stripped[: -len(escape)])
            continue
        parts.append(stripped)
        out.append((start, i, " ".join(parts)))
        start = -1
    if start >= 0:
        out.append((start, len(lines) - 1, " ".join(parts)))
    return out


def dockerfile_bases(text: str) -> list[str]:
    """The images a Dockerfile starts FROM (stage names and `scratch` left out)."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    bases: list[str] = []
    seen_from = False
    for _, _, instr in _instructions(text):
        word, _, rest = instr.partition(" ")
        word = word.upper()
        if word == "ARG" and not seen_from:
            name, _, default = rest.strip().partition("=")
            args[name.strip()] = default.strip().strip('"')
        elif word == "FROM":
            seen_from = True
            tokens = [t for t in rest.split() if not t.startswith("--")]
            if not tokens:
                continue
            image = re.sub(
                r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), ""), tokens[0]
            )  # global ARG defaults
            if image.lower() not in stages and image != "scratch" and image not in bases:
                bases.append(image)
            if len(tokens) >= 3 and tokens[1].lower() == "as":
                stages.add(tokens[2].lower())
    return bases


def with_build_ca(text: str) -> str:
    """The Dockerfile with the build-time CA bundle: every RUN mounts it as a secret and each
    stage declares ARGs (build-time only, never in the image's ENV) pointing tools at it."""
    lines = text.split("\n")
    mount = f"--mount=type=secret,id={CA_SECRET_ID},target={CA_TARGET},mode=0444"
    args = [f"ARG {v}={CA_TARGET}" for v in (*CA_ENV, CA_ENV_NODE)]
    inserts: dict[int, list[str]] = {}
    for first, last, instr in _instructions(text):
        word = instr.split(" ", 1)[0].upper()
        if word == "RUN":
            lines[first] = re.sub(r"^(\s*\S+)", lambda m: f"{m.group(1)} {mount}", lines[first])
        elif word == "FROM":
            inserts[last] = args
    out: list[str] = []
    for i, line in enumerate(lines):
        out.append(line)
        out.extend(inserts.get(i, []))
    return "\n".join(out)


def build_ca_bundle() -> bytes | None:
    """The CA bundle builds trust: $T1_BUILD_CA_BUNDLE, else $SSL_CERT_FILE, else this host's
    OpenSSL default (which holds any CA the machine's egress re-signs TLS with)."""
    import ssl

    candidates = [os.environ.get("T1_BUILD_CA_BUNDLE"), os.environ.get("SSL_CERT_FILE")]
    candidates.append(ssl.get_default_verify_paths().openssl_cafile)
    for path in candidates:
        if path and Path(path).is_file():
            return Path(path).read_bytes()
    return None


# -- images ------------------------------------------------------------------------------
def tar_bytes(files: dict[str, bytes], mode: int = 0o644) -> bytes:
    """A tar of `files`: scripts (.sh) executable, the rest `mode`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel, data in files.items():
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mode = 0o755 if rel.endswith(".sh") else mode
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def ensure_bases(client: Any, dockerfile: str) -> None:
    """Import the offline base image (sandbox.bases) for every FROM the engine does not have.

    An unmapped name raises `UnknownBaseImage` (an environment error naming it).
    """
    from sandbox.bases import ensure_base, lookup
    from sandbox.podman import import_base

    for name in dockerfile_bases(dockerfile):
        try:
            client.images.get(name)
            continue
        except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound
            pass
        base = lookup(name)
        rootfs = ensure_base(base)
        config = base.recipe.config()
        key = base.recipe.key + "-" + hashlib.sha256(repr(config).encode()).hexdigest()[:8]
        try:
            import_base(client, name, rootfs, key, config)
        except Exception as e:  # noqa: BLE001 - tar or the engine failed: not the task's fault
            raise SandboxError(f"importing base image {name} failed: {e}") from e


def verifier_dockerfile(image: str, user: str, packages: list[str]) -> str:
    """The Dockerfile of the verifier's toolchain layer over the task's built `image`: the
    venv at VERIFIER_VENV (sandbox.build.verifier_toolchain_script, the script the layer
    builder runs), made as root, then the image's own USER again (pure)."""
    from sandbox.build import verifier_toolchain_script

    script = verifier_toolchain_script(packages)
    lines = [f"FROM {image}", "USER root", "RUN " + json.dumps(["/bin/sh", "-c", script])]
    if user and user not in ("root", "0", "0:0"):
        lines.append(f"USER {user}")
    return "\n".join(lines) + "\n"


def _exists(client: Any, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound
        return False


def build_image(client: Any, task: Task, site: EngineSite) -> str:
    """Tag of the task's environment image, building the Dockerfile when absent; with
    `verifier_packages`, the image with the verifier's venv on top (its own tag)."""
    tag = f"{IMAGE_PREFIX}:{task.environment_hash[:20]}"
    packages = list(task.environment.verifier_packages)
    final = tag
    if packages:
        key = hashlib.sha256(repr((tag, packages, VERIFIER_VENV)).encode()).hexdigest()
        final = f"{IMAGE_PREFIX}:{key[:20]}"
        if _exists(client, final):
            return final
    if not _exists(client, tag):
        files = dict(task.environment.files)
        dockerfile = files.get("Dockerfile", b"").decode() or render_dockerfile(task)
        _build(client, task, tag, dockerfile, files, site)
    if packages:
        user = image_config(client, tag).user
        _build(client, task, final, verifier_dockerfile(tag, user, packages), {}, site)
    return final


def _build(
    client: Any, task: Task, tag: str, dockerfile: str, files: dict[str, bytes], site: EngineSite
) -> None:
    """Build `dockerfile` with the context `files` as `tag` (Podman: bases imported, the CA
    bundle a secret in the context; on this machine, RUN steps behind the build NAT)."""
    files = dict(files)
    podman = site.podman
    params: dict[str, Any] = {"t": tag, "rm": "1", "forcerm": "1"}
    if podman:
        ensure_bases(client, dockerfile)
        ca = build_ca_bundle()
        if ca is not None:
            dockerfile = with_build_ca(dockerfile)
            files[".t1-build-ca.crt"] = ca
            params["secrets"] = json.dumps([f"id={CA_SECRET_ID},src=.t1-build-ca.crt"])
    files["Dockerfile"] = dockerfile.encode()
    # No engine here can cap a build's storage (that needs overlay on XFS with project
    # quotas); what can be: every file a RUN step writes at most the task's disk (RLIMIT_FSIZE:
    # a 1.5 GB file fails the step), and the image's own layers checked once built.
    disk = task.limits.disk_mb << 20
    params["ulimits"] = json.dumps(  # Podman's compatible API takes the CLI's form
        [f"fsize={disk}:{disk}"] if podman else [{"Name": "fsize", "Soft": disk, "Hard": disk}]
    )
    if not site.local_podman:  # the engine's own build network
        log = _post_build(client, params, tar_bytes(files), task.limits.build_timeout_s)
    else:
        from sandbox.egress import UserNat

        # RUN steps get the internet through user-mode NAT, the host itself unreachable.
        with UserNat(NetworkPolicy(NetworkMode.BUILD)) as nat:
            params["nsoptions"] = json.dumps([{"Name": "network", "Path": nat.netns}])
            params["dnsservers"] = json.dumps(nat.nameservers())
            params["dnsoptions"] = json.dumps(["timeout:2", "attempts:3"])
            log = _post_build(client, params, tar_bytes(files), task.limits.build_timeout_s)
    if log.error is not None:
        tail = "".join(log.lines[-30:])[-3000:]
        # EFBIG, or SIGXFSZ (128 + 25) killing a step that ignored it; ENOSPC
        if re.search(r"File too large|exit status 153|No space left on device", tail + log.error):
            log.error += f" (past the task's disk: storage_mb={task.limits.disk_mb})"
        raise EnvironmentBuildError(f"task {task.id}: docker build failed: {log.error}\n{tail}")
    _check_size(client, task, tag, dockerfile)


def _check_size(client: Any, task: Task, tag: str, dockerfile: str) -> None:
    """Remove the image and fail the build (the task's error) when what the build added to
    its base exceeds the task's disk, as the local builder's LayerBudget does."""
    image = client.images.get(tag)
    bases = []
    for name in dockerfile_bases(dockerfile):
        try:
            bases.append(int(client.images.get(name).attrs.get("Size") or 0))
        except Exception:  # noqa: BLE001 - a stage name, or gone
            continue
    added = int(image.attrs.get("Size") or 0) - max(bases, default=0)
    if added > task.limits.disk_mb << 20:
        client.images.remove(image.id, force=True)
        raise EnvironmentBuildError(
            f"task {task.id}: the image exceeds the task's disk: {added >> 20} MB added to its "
            f"base, storage_mb={task.limits.disk_mb}"
        )


class _BuildLog:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.error: str | None = None


def _post_build(client: Any, params: dict[str, Any], context: bytes, timeout_s: float) -> _BuildLog:
    """POST /build (the SDK's build() cannot pass Podman's build secrets) and read its log."""
    api = client.api
    log = _BuildLog()
    deadline = time.monotonic() + timeout_s
    try:
        resp = api.post(
            f"{api.base_url}/v{api._version}/build",
            params=params,
            data=context,
            headers={"Content-Type": "application/x-tar"},
            stream=True,
            timeout=timeout_s,
        )
        if resp.status_code >= 400:
            log.error = f"HTTP {resp.status_code}: {resp.text[:2000]}"
            return log
        for raw in resp.iter_lines():
            if time.monotonic() > deadline:
                resp.close()
                log.error = f"build exceeded {timeout_s:.0f}s"
                break
            if not raw:
                continue
            doc = json.loads(raw)
            if "stream" in doc:
                log.lines.append(doc["stream"])
            if doc.get("error"):
                log.error = str(doc["error"]).strip()
    except Exception as e:  # noqa: BLE001 - a dropped or timed-out connection
        log.error = f"{type(e).__name__}: {e}"
    return log


def image_config(client: Any, image: str) -> ImageConfig:
    cfg = client.images.get(image).attrs.get("Config") or {}
    env = dict(e.split("=", 1) for e in cfg.get("Env") or [] if "=" in e)
    env.setdefault("PATH", DEFAULT_PATH)
    return ImageConfig(
        env=env,
        workdir=cfg.get("WorkingDir") or "/",
        user=cfg.get("User") or "",
        cmd=tuple(cfg["Cmd"]) if cfg.get("Cmd") else None,
        entrypoint=tuple(cfg["Entrypoint"]) if cfg.get("Entrypoint") else None,
    )
