"""Answers hidden in channels plain text search misses (`audit.channels`): archive members,
git history (loose, packed, dangling, commit messages), UTF-16 / Latin-1 / base64 notes and
serialized caches (pickle, SQLite, .pyc). Each attack is a planted task whose expected value
the text-only view (`visible_texts`) cannot see; the channel views must, and the leakage
check must name it. Clean controls: an archive or repository the instruction hands over."""

from __future__ import annotations

import io
import tarfile

import pytest

from audit import channel_forms, static_checks
from audit.channels import ChannelLimits, channel_views, pickle_text, utf16
from audit.planted import CHANNEL_LEAKS, Defect, generate
from audit.static_checks import built_texts, given_view, readable_texts, static_findings
from audit.verdict import Code
from tasks.model import EnvironmentSpec


@pytest.mark.parametrize("variant", CHANNEL_LEAKS)
@pytest.mark.parametrize("seed", [1, 8, 15, 29, 36, 43])
def test_answers_in_non_text_channels_are_leakage(variant: str, seed: int, monkeypatch):
    p = generate(seed, Defect.LEAKAGE, variant)
    task = p.task
    hardcoded = [lit for lit in static_findings(task).facts.literals if lit.kind.value != "path"]
    if not hardcoded:
        pytest.skip("a recomputing verifier asserts no literal: the trial judge's case")
    views = {w: t for w, t in readable_texts(task).items() if "!" in w}
    assert views, "the channel decodes to at least one view"
    leaks = [f for f in static_findings(task).findings if f.code == Code.TEST_LEAKAGE]
    assert leaks, (variant, seed, list(views))
    assert all("!" in f.evidence.split(" ", 1)[0] for f in leaks), leaks
    # the attack: read as text only (the audit before channels), the task has no leak
    monkeypatch.setattr(static_checks, "channel_texts", lambda task, limits=None: {})
    assert not [f for f in static_findings(task).findings if f.code == Code.TEST_LEAKAGE]


def test_git_history_views_cover_packed_deleted_and_dangling_objects():
    files = {"answers/expected.txt": b"total: 4129\n"}
    for how in ("deleted", "dangling", "message"):
        for packed in (False, True):
            repo = channel_forms.git_history(files, how, packed=packed)
            views = channel_views({f"app/{k}": v for k, v in repo.items()}).views
            hits = [w for w, t in views.items() if "total: 4129" in t]
            assert hits, (how, packed, sorted(views))
            if how == "deleted":  # a blob removed from the work tree keeps its tree path
                assert any(w.endswith("!blob:answers/expected.txt") for w in hits), hits


def test_archives_nest_and_are_bounded():
    inner = channel_forms.archive("zip", {"deep/expected.txt": b"4129\n"})
    outer = channel_forms.archive("tar.gz", {"inner.zip": inner, "a.txt": b"x\n"})
    views = channel_views({"app/outer.tgz": outer}).views
    assert views["app/outer.tgz!inner.zip!deep/expected.txt"] == "4129\n"
    # a member count and a byte budget cut the walk, never raise
    many = channel_forms.archive("tar", {f"m{i}.txt": b"v\n" for i in range(50)})
    cut = channel_views({"a.tar": many}, ChannelLimits(max_members=10))
    assert len(cut.views) == 10 and cut.cut
    small = channel_views({"a.tar": many}, ChannelLimits(total_bytes=20))
    assert len(small.views) < 50 and small.cut
    # a bomb: a gzip of 50 MB of zeros is read up to the member limit only
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("zeros")
        info.size = 50_000_000
        tf.addfile(info, io.BytesIO(b"\0" * info.size))
    bomb = channel_views({"b.tgz": buf.getvalue()}, ChannelLimits(member_bytes=1000))
    assert all(len(t) <= 1000 for t in bomb.views.values())


def test_decoders_read_without_executing():
    # a pickle whose loading would run code is read by its opcodes only
    evil = b"cos\nsystem\n(S'touch /tmp/t1-pwned'\ntR."
    assert "touch /tmp/t1-pwned" in (pickle_text(evil) or "")
    assert utf16("answer: 42".encode("utf-16-le")) == "answer: 42"
    sql = channel_forms.serialized("sqlite", {"count.txt": "317\n"})
    assert "317" in channel_views({"c.db": sql}).views["c.db!sqlite"]
    pyc = channel_forms.serialized("pyc", {"x": "yarrow"})
    assert "yarrow" in channel_views({"c.pyc": pyc}).views["c.pyc!pyc"].splitlines()


def test_a_repository_or_archive_the_task_hands_over_is_data():
    p = generate(8, Defect.LEAKAGE, "git-history")
    task = p.task
    said = task.instruction + "\nThe git repository in /app holds the project's history.\n"
    given = task.model_copy(update={"instruction": said})
    leaks = [f for f in static_findings(given).findings if f.code == Code.TEST_LEAKAGE]
    assert not [f for f in leaks if "as a whole field" in f.evidence], leaks
    # an archive named by the instruction: its members are inputs, not leaks
    p = generate(15, Defect.LEAKAGE, "archive-member")
    name = next(n for n in p.task.environment.files if n.endswith((".tar", ".zip", ".gz")))
    said = p.task.instruction + f"\nThe archive `/{name.replace('app/', 'app/', 1)}` is yours.\n"
    env = EnvironmentSpec.model_validate(p.task.environment.model_dump())
    given = p.task.model_copy(update={"instruction": said, "environment": env})
    leaks = [f for f in static_findings(given).findings if f.code == Code.TEST_LEAKAGE]
    assert not [f for f in leaks if "whole field" in f.evidence], leaks


def test_built_files_under_a_named_directory_are_data_and_a_built_cache_is_not():
    task = generate(8, Defect.LEAKAGE, "answer-file").task
    said = task.instruction + "\nThe service's files are in `/srv/service`.\n"
    task = task.model_copy(update={"instruction": said})
    assert given_view("image:/srv/service/config/settings.env", task)
    assert not given_view("image:/var/lib/kelp/r0.cache", task)
    assert not given_view(f"image:{task.environment.workdir}/.state/r0", task)
    views = built_texts({"/var/lib/kelp/r0.cache": b"317\n", "/opt/a.tgz": b"\x1f\x8bbad"})
    assert views["image:/var/lib/kelp/r0.cache"] == "317\n"
