"""sandbox.git_guards: the driver names the agent's git configuration defines, and the
command-scope settings that pin them (the attacks in a sandbox: test_hostile.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest

from sandbox.git_guards import (
    GUARD_FILES,
    NO_FILE_TRANSPORT,
    driver_sections,
    fixed_env,
    guard_env,
    parse_config,
)


def test_sections_and_includes_are_read_in_every_form():
    text = (
        '[core]\n bare = false\n[filter "lfs x"]\n clean = a\n[DIFF "Up"] textconv = b\n'
        '[merge.old]\n driver = c\n[remote "origin"]\n url = /r\n[include]\n'
        ' path = "extra.cfg" ; comment\n[includeIf "gitdir:/app/"]\n path = ~/more\n'
        "[user]\n path = not-an-include\n"
    )
    sections, includes = parse_config(text)
    assert sections == {("filter", "lfs x"), ("diff", "Up"), ("merge", "old")}
    assert includes == ["extra.cfg", "~/more"]


@pytest.mark.parametrize(
    "text",
    [
        '[remote "up"]\n url = /r\n uploadPack = /x\n',
        "[remote.up] receivepack = /x\n",
        '[remote "up"]\n pushurl = /srv/bare\n',
        '[url "/srv/bare"]\n pushInsteadOf = https://example.com/\n',
    ],
)
def test_settings_out_of_the_command_scopes_reach_cost_the_file_transport(text: str):
    """A remote's upload-pack or receive-pack program, its push URL or a push URL rewrite the
    agent wrote: no clone, fetch or push over the file transport (pure)."""
    sections, _ = parse_config(text)
    assert sections == {NO_FILE_TRANSPORT}
    env = guard_env({"GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh"}, sections)
    assert env["GIT_ALLOW_PROTOCOL"] == "git:http:https:ssh"
    assert parse_config('[remote "origin"]\n url = /r\n fetch = +refs/*:refs/*\n')[0] == set()


def test_sections_named_by_the_agent_are_pinned():
    """Tool, archive, send-email, help sections and each command's pager (pure)."""
    text = (
        '[pager]\n log = /x\n[tar "tar.gz"]\n command = /x\n[difftool "a"]\n cmd = /x\n'
        '[mergetool "kompare"]\n path = /x\n[sendemail "me"]\n sendmailCmd = /x\n'
        '[man "m"]\n cmd = /x\n[browser "b"]\n cmd = /x\n'
    )
    sections, _ = parse_config(text)
    assert sections == {
        ("pager", "log"),
        ("tar", "tar.gz"),
        ("difftool", "a"),
        ("mergetool", "kompare"),
        ("sendemail", "me"),
        ("man", "m"),
        ("browser", "b"),
    }
    env = guard_env({}, sections)
    pins = {env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"] for i in range(len(env) // 2)}
    assert pins["pager.log"] == "false" and pins["tar.tar.gz.command"] == "gzip -cn"
    assert pins["mergetool.kompare.path"] == "" and pins["difftool.a.cmd"] == ""
    assert pins["sendemail.me.sendmailCmd"] == "/usr/sbin/sendmail -i -t #"
    assert pins["sendemail.me.smtpServer"] == "/usr/sbin/sendmail"


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
    env = guard_env({"PATH": "/usr/bin:/bin", **fixed_env(_guard_dir(tmp_path))}, sections)
    outputs = []
    for args in (["status", "--short"], ["diff"], ["log", "-p", "-1"], ["add", "-A"]):
        r = subprocess.run([*git, *args], env=env, capture_output=True, text=True)
        assert r.returncode == 0, (args, r.stderr)
        outputs.append(r.stdout)
    assert not ran.exists()
    assert "+b" in outputs[1]


def test_the_file_transport_serves_clones_and_fetches_but_no_push(tmp_path: Path):
    """With the guards a local clone and fetch work; a push to a local repository is refused
    with git's message naming the guard; a network remote's push URL is left as written."""
    ids = {
        f"GIT_{w}_{k}": v
        for w in ("AUTHOR", "COMMITTER")
        for k, v in (("NAME", "t"), ("EMAIL", "t@t"))
    }
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **ids, **fixed_env(_guard_dir(tmp_path))}

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=tmp_path, env=env, capture_output=True, text=True)

    assert git("init", "-q", "src").returncode == 0
    assert git("-C", "src", "commit", "-q", "--allow-empty", "-m", "i").returncode == 0
    assert git("clone", "-q", "--bare", "src", "bare").returncode == 0, "local clone"
    assert git("clone", "-q", "bare", "work").returncode == 0
    assert git("-C", "work", "fetch", "-q").returncode == 0, "local fetch"
    push = git("-C", "work", "push", "origin", "HEAD:refs/heads/x")
    assert push.returncode != 0
    assert "transport 'verifier-no-local-push' not allowed" in push.stderr, push.stderr
    assert git("-C", "work", "remote", "add", "net", "https://example.invalid/x").returncode == 0
    url = git("-C", "work", "remote", "get-url", "--push", "net").stdout.strip()
    assert url == "https://example.invalid/x"


# Settings outside the drivers that make git run a program: each written where the agent can
# write it (the repository's config, ~/.gitconfig, $XDG_CONFIG_HOME/git/config), the agent's
# other changes (`agent`, run in the repository before the verifier), then the git command a
# verifier runs. @H@ is the agent's program, @R@ the file it writes (a trace target writes it
# itself), @T@ the directory of the case ($T in commands); `evil` a remote helper the agent
# put on PATH.
class Vector(NamedTuple):
    where: str
    config: str
    command: str
    agent: str = ""
    needs: str = ""  # a git command the host's git may lack (the case is skipped without it)
    works: bool = False  # the command still succeeds with the guards (the setting's job done)


# a commit with a signature block, made with a fake gpg
SIGNED = "git -c gpg.program=$T/fakegpg commit -q -S --allow-empty -m signed"
# a file to commit; an add/add conflict left by a merge
CHANGE = "echo a > f; git add f; git commit -qm f; echo b >> f"
CONFLICT = (
    "git checkout -qb other; echo o > f; git add f; git commit -qm o; git checkout -q -;"
    " echo m > f; git add f; git commit -qm m; git merge -q other >/dev/null 2>&1 || true"
)
COMMIT = "echo a > f; git add f; git commit -qm f"
SEND = (
    "git send-email --confirm=never --no-thread --suppress-cc=all --to=t@t.invalid"
    " --from=t@t.invalid -1 </dev/null"
)
TTY = "script -qec"  # a terminal for git's pager: script -qec "git log" /dev/null
# a bare repository of the agent's whose every receive-side hook is the agent's program
BARE = (
    "git init -q --bare $T/bare; for h in pre-receive update post-receive post-update"
    " reference-transaction push-to-checkout; do cp $T/hook.sh $T/bare/hooks/$h; done"
)
PUSH = "git push -q {} HEAD:refs/heads/v"
# the agent's gpg options: a key the keyring lacks is fetched by the dirmngr it names
GNUPG = (
    "mkdir -p -m 700 ~/.gnupg; printf 'auto-key-retrieve\\ndirmngr-program %s\\n'"
    " $T/hook.sh > ~/.gnupg/gpg.conf"
)
PROGRAM_SETTINGS = {
    "submodule-update": Vector(
        "repo",
        '[submodule "sub"]\n update = !@H@\n',
        "git -c protocol.file.allow=always submodule update --remote",
        works=True,
    ),
    "gpg-program": Vector(
        "repo", "[gpg]\n program = @H@\n", "git log -1 --show-signature", works=True
    ),
    "gpg-openpgp-program": Vector(
        "global", '[gpg "openpgp"]\n program = @H@\n', "git log -1 --show-signature", works=True
    ),
    "gpg-options": Vector(  # the image's gpg runs what the agent's gpg.conf names
        "repo", "[log]\n showSignature = true\n", "git log -1", agent=GNUPG, works=True
    ),
    # signature checks the verifier asks for: the image's gpg with the agent's home
    "gpg-options-show-signature": Vector(
        "repo", "", "git log -1 --show-signature", agent=GNUPG, works=True
    ),
    "gpg-options-verify-commit": Vector("repo", "", "git verify-commit HEAD", agent=GNUPG),
    "gpg-options-verify-tag": Vector(
        "repo",
        "",
        "git verify-tag v1",
        agent=f"{GNUPG}; git -c gpg.program=$T/fakegpg tag -s -m t v1",
    ),
    "gpg-options-merge-verify-signatures": Vector(
        "repo",
        "",
        "git merge -q --ff-only --verify-signatures signed",
        agent=f"{GNUPG}; git branch signed; git reset -q --hard HEAD~1",
    ),
    "alias": Vector("xdg", "[alias]\n check = !@H@\n", "git check"),
    "remote-vcs": Vector("repo", '[remote "up"]\n vcs = evil\n url = /nowhere\n', "git fetch up"),
    "url-rewrite-to-helper": Vector(
        "global",
        '[url "evil::x"]\n insteadOf = /srv/up\n',
        "git ls-remote /srv/up",
    ),
    "credential-url-helper": Vector(
        "repo",
        '[credential "https://example.com"]\n helper = !@H@\n',
        "printf 'protocol=https\\nhost=example.com\\n\\n' | git credential fill",
    ),
    "git-proxy": Vector("repo", "[core]\n gitProxy = @H@\n", "git ls-remote git://127.0.0.1:1/x"),
    "pack-objects-hook": Vector(
        "global",
        "[uploadpack]\n packObjectsHook = @H@\n",
        "git clone -q file://$T/repo $T/clone",
        works=True,
    ),
    "pack-objects-hook-fetch": Vector(
        "global",
        "[uploadpack]\n packObjectsHook = @H@\n",
        "git fetch -q file://$T/sub",
        works=True,
    ),
    # push: git-receive-pack runs in the receiving repository without the command scope
    "push-path": Vector("repo", "", PUSH.format("$T/bare"), agent=BARE),
    "push-relative-path": Vector("repo", "", PUSH.format("../bare"), agent=BARE),
    "push-file-url": Vector("repo", "", PUSH.format("file://$T/bare"), agent=BARE),
    "push-remote": Vector(
        "repo", "", PUSH.format("up"), agent=f"{BARE}; git remote add up $T/bare"
    ),
    "remote-pushurl": Vector(
        "repo",
        '[remote "up"]\n url = https://example.invalid/x\n pushurl = @T@/bare\n',
        PUSH.format("up"),
        agent=BARE,
    ),
    "url-push-instead-of": Vector(
        "global",
        '[url "@T@/bare"]\n pushInsteadOf = https://example.invalid/x\n',
        PUSH.format("https://example.invalid/x"),
        agent=BARE,
    ),
    # first-wins settings: the repository's value before the command scope's
    "remote-upload-pack": Vector(
        "repo", '[remote "up"]\n url = @T@/sub\n uploadpack = @H@\n', "git fetch -q up"
    ),
    "remote-receive-pack": Vector(
        "repo", '[remote "up"]\n url = @T@/sub\n receivepack = @H@\n', PUSH.format("up")
    ),
    "alternate-refs-command": Vector(
        "repo",
        "[core]\n alternateRefsCommand = @H@\n",
        "git fetch -q $T/sub",
        agent="echo $T/sub/.git/objects > .git/objects/info/alternates",
        works=True,
    ),
    "difftool-cmd": Vector(
        "repo",
        '[diff]\n tool = mine\n[difftool "mine"]\n cmd = @H@\n[difftool]\n prompt = false\n',
        "git difftool </dev/null",
        agent=CHANGE,
    ),
    "tool-path": Vector(  # a built-in tool the verifier names, run from the agent's path
        "global",
        '[mergetool "kompare"]\n path = @H@\n',
        "git difftool -y --tool=kompare </dev/null",
        agent=CHANGE,
    ),
    "mergetool-cmd": Vector(
        "repo",
        '[merge]\n tool = mine\n[mergetool "mine"]\n cmd = @H@\n[mergetool]\n prompt = false\n',
        "git mergetool </dev/null",
        agent=CONFLICT,
    ),
    "core-pager": Vector(
        "repo", "[core]\n pager = @H@\n", f"{TTY} 'git log -1' /dev/null", works=True
    ),
    "command-pager": Vector(
        "repo", "[pager]\n log = @H@\n", f"{TTY} 'git log -1' /dev/null", works=True
    ),
    "interactive-diff-filter": Vector(
        "repo",
        "[interactive]\n diffFilter = @H@\n",
        f"env TERM=xterm {TTY} 'git add -p' /dev/null </dev/null",
        agent=CHANGE,
        works=True,
    ),
    "archive-filter": Vector(
        "repo", '[tar "tar.gz"]\n command = @H@\n', "git archive -o $T/out.tar.gz HEAD", works=True
    ),
    "ssh-signing-key-command": Vector(
        "global",
        '[commit]\n gpgSign = true\n[gpg]\n format = ssh\n[gpg "ssh"]\n defaultKeyCommand = @H@\n',
        "git commit -q --allow-empty -m v",
    ),
    "trace2-target": Vector("global", "[trace2]\n normalTarget = @R@\n", "git status", works=True),
    "fsmonitor": Vector("repo", "[core]\n fsmonitor = @H@\n", "git status", works=True),
    "hooks": Vector(
        "repo",
        "",
        "git commit -q --allow-empty -m v",
        agent="cp $T/hook.sh .git/hooks/post-commit",
        works=True,
    ),
    "core-editor": Vector("xdg", "[core]\n editor = @H@\n", "git commit -q --allow-empty"),
    "sequence-editor": Vector(
        "repo", "[sequence]\n editor = @H@\n", "git rebase -q -i HEAD~1", works=True
    ),
    "ssh-command": Vector(
        "repo", "[core]\n sshCommand = @H@\n", "git ls-remote ssh://example.invalid/x"
    ),
    "external-diff": Vector("repo", "[diff]\n external = @H@\n", "git diff", agent=CHANGE),
    "sendemail-sendmail-cmd": Vector(
        "repo", "[sendemail]\n sendmailCmd = @H@\n", SEND, agent=COMMIT, needs="send-email"
    ),
    "sendemail-smtp-server-path": Vector(
        "repo", "[sendemail]\n smtpServer = @H@\n", SEND, agent=COMMIT, needs="send-email"
    ),
    "sendemail-identity": Vector(
        "global",
        '[sendemail]\n identity = me\n[sendemail "me"]\n sendmailCmd = @H@\n',
        SEND,
        agent=COMMIT,
        needs="send-email",
    ),
    "sendemail-to-cmd": Vector(
        "repo",
        "[sendemail]\n toCmd = @H@\n",
        f"{SEND} --dry-run",
        agent=COMMIT,
        needs="send-email",
        works=True,
    ),
    "imap-tunnel": Vector(
        "repo",
        "[imap]\n folder = x\n tunnel = @H@\n",
        "git format-patch -1 --stdout | git imap-send",
        agent=COMMIT,
    ),
    "man-viewer": Vector(
        "global", '[man]\n viewer = mine\n[man "mine"]\n cmd = @H@\n', "git help log"
    ),
    "web-browser": Vector(
        "repo",
        '[web]\n browser = mine\n[browser "mine"]\n cmd = @H@\n',
        "git web--browse http://example.invalid/",
    ),
    "instaweb-httpd": Vector(
        "repo",
        "[instaweb]\n httpd = @T@/evil/lighttpd\n",
        "git instaweb --start",
        agent="mkdir -p $T/evil; cp $T/hook.sh $T/evil/lighttpd",
        needs="instaweb",
    ),
    # no server configured: instaweb looks for its default (lighttpd) on PATH, then in
    # /usr/local/sbin, /usr/sbin, gitweb's directory and the repository's .git/gitweb
    "instaweb-repository-server": Vector(
        "repo",
        "",
        "git instaweb --start",
        agent="mkdir -p .git/gitweb; cp $T/hook.sh .git/gitweb/lighttpd",
        needs="instaweb",
    ),
}
CONFIG_AT = {"repo": "repo/.git/config", "global": "home/.gitconfig", "xdg": "xdg/git/config"}
# A fake gpg that signs with a real signature packet (of other data, by a key nobody has): a
# verifying gpg parses it and looks for the key.
FAKE_GPG = """#!/bin/sh
cat >/dev/null
echo "[GNUPG:] SIG_CREATED " >&2
cat <<'EOF'
-----BEGIN PGP SIGNATURE-----

iHUEABYIAB0WIQRNZq2Al1p4Ww5fUZV0d0BXgJgtRgUCaxCURAAKCRB0d0BXgJgt
RvskAQDHWBbDBVD5hVBMnj2LN6GdnFe5ShCmjNM79YJEzOJbggD+K9cZNeRMzX5J
gbz2R1WZh2fwGtGbQ1Dh4DwoMNcIVgM=
=d9cO
-----END PGP SIGNATURE-----
EOF
"""


def _program_setting(tmp: Path, name: str, guarded: bool) -> tuple[bool, int]:
    """Whether the agent's program ran when the verifier's git command ran, and the command's
    exit status."""
    vector = PROGRAM_SETTINGS[name]
    tmp.mkdir()
    ran, hook = tmp / "ran", tmp / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho "$0 $*" >> {ran}\ncat >/dev/null 2>&1 </dev/null\n')
    (tmp / "bin").mkdir()
    (tmp / "bin" / "git-remote-evil").write_text(hook.read_text())
    (tmp / "fakegpg").write_text(FAKE_GPG)
    # the image's vim (which difftool and mergetool fall back to) waits for a terminal
    (tmp / "bin" / "vim").write_text("#!/bin/sh\nexit 0\n")
    for p in (hook, tmp / "bin" / "git-remote-evil", tmp / "fakegpg", tmp / "bin" / "vim"):
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
    target = tmp / CONFIG_AT[vector.where]
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a") as f:
        f.write(
            vector.config.replace("@H@", str(hook))
            .replace("@R@", str(ran))
            .replace("@T@", str(tmp))
        )
    if vector.agent:
        agent = ["bash", "-c", f"set -e; cd repo; {vector.agent}"]
        subprocess.run(agent, cwd=tmp, env=env, check=True, capture_output=True)
    if guarded:
        sections = driver_sections([str(target)], lambda p: Path(p).read_bytes())
        env = guard_env({**env, **fixed_env(_guard_dir(tmp))}, sections)
    r = subprocess.run(
        ["bash", "-c", f"cd repo && timeout 20 {vector.command}"],
        cwd=tmp,
        env=env,
        capture_output=True,
        timeout=60,
    )
    return ran.exists(), r.returncode


@pytest.mark.parametrize("name", sorted(PROGRAM_SETTINGS))
def test_guards_pin_settings_that_run_programs_in_real_git(tmp_path: Path, name: str):
    """Each setting runs the agent's program for the git command a verifier runs (the attack,
    checked unguarded first), and runs nothing with the verifier's guards."""
    needs = PROGRAM_SETTINGS[name].needs
    if needs and shutil.which(f"git-{needs}", path=_git_exec_path()) is None:
        pytest.skip(f"the host's git has no `git {needs}`")
    assert _program_setting(tmp_path / "open", name, guarded=False)[0], f"{name}: attack inert"
    ran, status = _program_setting(tmp_path / "guarded", name, guarded=True)
    assert not ran, name
    assert status == 0 or not PROGRAM_SETTINGS[name].works, (name, status)


def _guard_dir(tmp: Path) -> str:
    """GUARD_FILES staged in `tmp`/guard, as the harness stages them with the tests."""
    guard = tmp / "guard"
    guard.mkdir()
    for name, data in GUARD_FILES.items():
        (guard / name).write_bytes(data)
        (guard / name).chmod(0o755)
    return str(guard)


def _git_exec_path() -> str:
    return subprocess.run(["git", "--exec-path"], capture_output=True, text=True).stdout.strip()
