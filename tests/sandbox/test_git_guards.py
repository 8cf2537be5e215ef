"""sandbox.git_guards: the driver names the agent's git configuration defines, and the
command-scope settings that pin them (the attacks in a sandbox: test_hostile.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

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


# Settings outside the drivers that make git run a program: each written where the agent can
# write it (the repository's config, ~/.gitconfig, $XDG_CONFIG_HOME/git/config), then the git
# command a verifier runs. @H@ is the agent's program; `evil` a remote helper it put on PATH.
# a commit with a signature block, made with a fake gpg
SIGNED = "git -c gpg.program=$T/fakegpg commit -q -S --allow-empty -m signed"
PROGRAM_SETTINGS = {
    "submodule-update": (
        "repo",
        '[submodule "sub"]\n update = !@H@\n',
        "git -c protocol.file.allow=always submodule update --remote",
    ),
    "gpg-program": ("repo", "[gpg]\n program = @H@\n[log]\n showSignature = true\n", "git log -1"),
    "gpg-openpgp-program": (
        "global",
        '[gpg "openpgp"]\n program = @H@\n[log]\n showSignature = true\n',
        "git log -1",
    ),
    "alias": ("xdg", "[alias]\n check = !@H@\n", "git check"),
    "remote-vcs": ("repo", '[remote "up"]\n vcs = evil\n url = /nowhere\n', "git fetch up"),
    "url-rewrite-to-helper": (
        "global",
        '[url "evil::x"]\n insteadOf = /srv/up\n',
        "git ls-remote /srv/up",
    ),
    "credential-url-helper": (
        "repo",
        '[credential "https://example.com"]\n helper = !@H@\n',
        "printf 'protocol=https\\nhost=example.com\\n\\n' | git credential fill",
    ),
    "git-proxy": ("repo", "[core]\n gitProxy = @H@\n", "git ls-remote git://127.0.0.1:1/x"),
    "pack-objects-hook": (
        "global",
        "[uploadpack]\n packObjectsHook = @H@\n",
        "git clone -q file://$T/repo $T/clone",
    ),
}
CONFIG_AT = {"repo": "repo/.git/config", "global": "home/.gitconfig", "xdg": "xdg/git/config"}
FAKE_GPG = """#!/bin/sh
cat >/dev/null
echo "[GNUPG:] SIG_CREATED " >&2
printf -- '-----BEGIN PGP SIGNATURE-----\\n\\nAAAA\\n-----END PGP SIGNATURE-----\\n'
"""


def _program_setting(tmp: Path, name: str, guarded: bool) -> bool:
    """Whether the agent's program ran when the verifier's git command ran."""
    where, config, command = PROGRAM_SETTINGS[name]
    tmp.mkdir()
    ran, hook = tmp / "ran", tmp / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho "$0 $*" >> {ran}\ncat >/dev/null 2>&1 </dev/null\n')
    (tmp / "bin").mkdir()
    (tmp / "bin" / "git-remote-evil").write_text(hook.read_text())
    (tmp / "fakegpg").write_text(FAKE_GPG)
    for p in (hook, tmp / "bin" / "git-remote-evil", tmp / "fakegpg"):
        p.chmod(0o755)
    (tmp / "home").mkdir()
    (tmp / "xdg").mkdir()
    env = {
        "PATH": f"{tmp}/bin:/usr/bin:/bin",
        "HOME": str(tmp / "home"),
        "XDG_CONFIG_HOME": str(tmp / "xdg"),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "T": str(tmp),
    }
    setup = (
        "set -e; git init -q sub; git -C sub commit -q --allow-empty -m s;"
        " git init -q repo; cd repo; git commit -q --allow-empty -m i;"
        " git -c protocol.file.allow=always submodule add -q $T/sub sub; git commit -qm sub;"
        f" git -C $T/sub commit -q --allow-empty -m s2; {SIGNED}"
    )
    subprocess.run(["bash", "-c", setup], cwd=tmp, env=env, check=True, capture_output=True)
    target = tmp / CONFIG_AT[where]
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a") as f:
        f.write(config.replace("@H@", str(hook)))
    if guarded:
        sections = driver_sections([str(target)], lambda p: Path(p).read_bytes())
        env = guard_env({**env, **fixed_env()}, sections)
    subprocess.run(
        ["bash", "-c", f"cd repo && timeout 20 {command}"],
        cwd=tmp,
        env=env,
        capture_output=True,
        timeout=60,
    )
    return ran.exists()


@pytest.mark.parametrize("name", sorted(PROGRAM_SETTINGS))
def test_guards_pin_settings_that_run_programs_in_real_git(tmp_path: Path, name: str):
    """Each setting runs the agent's program for the git command a verifier runs (the attack,
    checked unguarded first), and runs nothing with the verifier's guards."""
    assert _program_setting(tmp_path / "open", name, guarded=False), f"{name}: attack inert"
    assert not _program_setting(tmp_path / "guarded", name, guarded=True), name
