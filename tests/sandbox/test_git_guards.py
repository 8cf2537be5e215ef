"""sandbox.git_guards: the driver names the agent's git configuration defines, and the
command-scope settings that pin them (the attacks in a sandbox: test_hostile.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from sandbox.git_guards import driver_sections, fixed_env, guard_env, parse_config


def test_sections_and_includes_are_read_in_every_form():
    text = (
        '[core]\n bare = false\n[filter "lfs x"]\n clean = a\n[DIFF "Up"] textconv = b\n'
        '[merge.old]\n driver = c\n[remote "origin"]\n url = /r\n[include]\n'
        ' path = "extra.cfg" ; comment\n[includeIf "gitdir:/app/"]\n path = ~/more\n'
        "[user]\n path = not-an-include\n"
    )
    sections, includes = parse_config(text)
    assert sections == {("filter", "lfs x"), ("diff", "Up"), ("merge", "old"), ("remote", "origin")}
    assert includes == ["extra.cfg", "~/more"]


def test_included_files_are_followed_and_bounded():
    files = {
        "/app/repo/.git/config": b"[include]\n path = ../../notes.txt\n",
        "/app/notes.txt": b'[filter "x"]\n clean = h\n[include]\n path = ~/loop\n',
        "/root/loop": b'[diff "y"]\n command = h\n[include]\n path = /app/notes.txt\n',
        "/app/readme": b'[filter "never"]\n',  # not a config file, not included
    }
    found = driver_sections(["/app/repo/.git/config", "/app/readme"], files.get)
    assert found == {("filter", "x"), ("diff", "y")}


def test_guards_neutralize_the_drivers_in_real_git(tmp_path: Path):
    """git with the guards runs none of the repository's drivers and still works: status,
    diff (the external driver replaced by git's own diff), log -p, add, checkout."""
    repo, ran = tmp_path / "repo", tmp_path / "ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\ntouch {ran}\n[ -f "$1" ] && exec cat "$1"\nexec cat\n')
    hook.chmod(0o755)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "f").write_text("a\n")
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-qm", "i"], check=True)
    (repo / ".gitattributes").write_text("* filter=x diff=x\n")
    with (repo / ".git" / "config").open("a") as c:
        c.write(f'[filter "x"]\n clean = {hook}\n smudge = {hook}\n[diff "x"]\n')
        c.write(f" textconv = {hook}\n command = {hook}\n")
    (repo / "f").write_text("a\nb\n")
    sections = driver_sections([str(repo / ".git" / "config")], lambda p: Path(p).read_bytes())
    env = guard_env({"PATH": "/usr/bin:/bin", **fixed_env()}, sections)
    outputs = []
    for args in (["status", "--short"], ["diff"], ["log", "-p", "-1"], ["add", "-A"]):
        r = subprocess.run([*git, *args], env=env, capture_output=True, text=True)
        assert r.returncode == 0, (args, r.stderr)
        outputs.append(r.stdout)
    assert not ran.exists()
    assert "+b" in outputs[1]
