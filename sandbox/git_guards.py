"""Command-scope git settings for the verifier: git run by the verifier in the agent's tree runs
no program the agent configured (docs/sandbox.md, the threat model).

git reads settings from the system file (/etc/gitconfig), the user's (~/.gitconfig), the
repository's (.git/config and what it includes) and the command scope (`GIT_CONFIG_COUNT`/
`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` in the environment), the last winning. The agent can
write all but the last. Settings with fixed names that run a program are pinned in
`GIT_GUARDS`. Drivers are named by the agent: `.gitattributes` (or .git/info/attributes) maps
paths to a driver name and the configuration defines it: `filter.<name>.clean`/`smudge`/
`process` (run by status, diff, add, checkout), `diff.<name>.textconv` and `.command` (diff,
log -p, show), `merge.<name>.driver` (merge), `submodule.<name>.update = !command`
(submodule update), `tar.<format>.command`
(archive), `difftool.<name>.cmd`/`path` and `mergetool.<name>.*` (difftool, mergetool; also a
built-in tool's path, which git finds by guessing when no tool is set), `sendemail.<identity>.*`
(send-email), `man.<viewer>.*` (help) and `browser.<name>.*` (web--browse); `alias.<name> =
!command` (`git <name>` for a name that is no git command) and `pager.<command>` (the pager of
`git <command>` on a terminal). `driver_sections` reads the names from the configuration
files the agent wrote (and the files they include); `guard_env` pins each named driver to a
harmless program of the toolchain (or to git's default, where an empty value means it), each
alias to nothing and each command's pager to none.

Two programs are out of the command scope's reach: `core.gitProxy` (the first value that
matches wins, and the environment's GIT_PROXY_COMMAND is read before any file) and
`uploadpack.packObjectsHook` (read by the upload-pack a local clone or fetch starts, whose
environment git clears of command-scope settings; honoured in the user's and the system's
files). The first is pinned by an empty GIT_PROXY_COMMAND; for the second, an agent's file
that sets it costs the verifier's git the user's and the system's files
(GIT_CONFIG_GLOBAL=/dev/null, GIT_CONFIG_NOSYSTEM). Remote helpers (`remote.<name>.vcs`, a
`<helper>::` URL, also one an agent's `url.<base>.insteadOf` rewrites to) run a `git-remote-*`
program found on PATH: only git's own transports are allowed (GIT_ALLOW_PROTOCOL). Trace2
targets (`trace2.*Target`, honoured in the user's file and read before the command scope)
make git write to a path or socket the agent chose: the environment's GIT_TRACE2* win.

A push reaches nothing of the command scope's either: over the file transport (a path, a
`file://` URL) it starts git-receive-pack in the receiving repository, with command-scope
settings cleared, and that repository's hooks and settings run (the receiving repository's
configuration wins over what the user's and the system's files could pin). Every push URL is
rewritten (`url.<base>.pushInsteadOf`, empty prefix) to a transport git refuses, except those
of git's network transports (rewritten to themselves): the verifier's pushes over the file
transport are refused. A rewrite the agent wrote wins over it (the longest prefix wins), a
`remote.<name>.pushurl` is never rewritten by it, and `remote.<name>.uploadpack`/`receivepack`
are first-wins (the repository's value before the command scope's): an agent's file that sets
one of these costs the verifier the file transport (GIT_ALLOW_PROTOCOL without `file`: no
local clone, fetch or push). gpg, which git runs to check (or make) a signature, reads the
options of the agent's home (`dirmngr-program`, `agent-program`, `photo-viewer`): the gpg
programs are pinned to the harness's own scripts (`GUARD_FILES`, staged beside the tests),
which run the image's gpg and gpgsm with no home; /etc/gnupg, which gpg reads even so, is the
image's in the verifier's sandbox (a fresh one from the image, sandbox.judge).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping

# The transport a push over the file transport is rewritten to: git refuses it (it is no
# allowed protocol) with "transport 'verifier-no-local-push' not allowed".
NO_LOCAL_PUSH = "verifier-no-local-push"
NETWORK_SCHEMES = ("https://", "http://", "git://", "ssh://")
# Settings with fixed names: fsmonitor runs on every `git status`, hooks on commits and
# checkouts, pager and editor on `git log`/`commit`.
GIT_GUARDS = {
    "core.fsmonitor": "false",
    "core.hooksPath": "/dev/null",
    "core.pager": "cat",
    "core.editor": "true",
    "sequence.editor": "true",
    "core.sshCommand": "false",
    "core.askPass": "",
    "credential.helper": "",
    "diff.external": "",
    "protocol.ext.allow": "never",
    # no signature checked unasked (the gpg programs are pinned by `program_guards`)
    "log.showSignature": "false",
    # ssh signatures: the image's own program, by absolute path (/usr is the image's on both
    # backends)
    "gpg.ssh.program": "/usr/bin/ssh-keygen",
    # an ssh signature without user.signingKey (commit.gpgSign, commit -S): no key, as unset
    "gpg.ssh.defaultKeyCommand": "false",
    # fetch into a repository with alternates (.git/objects/info/alternates): no tips of the
    # alternates advertised, an optimization only
    "core.alternateRefsCommand": "true",
    "interactive.diffFilter": "cat",  # add -p on a terminal
    "imap.tunnel": "false",  # imap-send
    # send-email: the image's sendmail (the default's first choice) for both ways of naming a
    # program (git before 2.33 knows only the path in smtpServer); recipients from no program.
    # The command is run as `sh -c '<cmd> "$@"'` with the agent's `smtpServerOption` values
    # (a list: the command scope cannot empty it) first in "$@" (sendmail's -C, exim's -be
    # run what they name): the comment drops them all, recipients are read from the headers
    "sendemail.sendmailCmd": "/usr/sbin/sendmail -i -t #",
    "sendemail.smtpServer": "/usr/sbin/sendmail",
    "sendemail.toCmd": "true",
    "sendemail.ccCmd": "true",
    "sendemail.headerCmd": "true",
    # instaweb: no web server (the agent's, or one the script finds in the repository's
    # gitweb directory when the image has none); the gitweb scripts and apache modules of the
    # image when the verifier names a server itself
    "instaweb.httpd": "/bin/false",
    "instaweb.gitwebDir": "",
    "instaweb.modulePath": "",
    # push: over the file transport refused (the docstring); git's network transports as asked
    f"url.{NO_LOCAL_PUSH}::.pushInsteadOf": "",
    **{f"url.{scheme}.pushInsteadOf": scheme for scheme in NETWORK_SCHEMES},
}
# Environment variables: no proxy command for git://, git's own transports only (file, git,
# http(s) through the image's git-remote-http, ssh through core.sshCommand above).
GIT_ENV = {
    "GIT_PROXY_COMMAND": "",
    "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh",
    # no trace written where the agent's ~/.gitconfig says ("0": off; the environment wins)
    "GIT_TRACE2": "0",
    "GIT_TRACE2_EVENT": "0",
    "GIT_TRACE2_PERF": "0",
}
# An agent's file that sets a pack-objects hook: the user's and the system's files unread.
NO_USER_CONFIG = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
# Programs the harness stages for the verifier (in a directory of its own, `guard_dir`): git's
# signature checks and signing run the image's gpg and gpgsm with no home (/dev/null, under
# which nothing can be made): no options file, keyring or socket of the agent's home, and none
# of an agent (dirmngr, gpg-agent, keyboxd) started, whose sockets would be there.
_GNUPG_WRAPPER = (
    "#!/bin/sh\n# git's signature checks in the verifier: the image's {0}, no home (no options,\n"
    '# keys or agents of the agent\'s home)\nexec /usr/bin/{0} --homedir /dev/null "$@"\n'
)
GUARD_FILES = {f"{p}.sh": _GNUPG_WRAPPER.format(p).encode() for p in ("gpg", "gpgsm")}
# git's own diff of the two files an external diff driver is handed (path old-file old-hex
# old-mode new-file new-hex new-mode); exit 1 (they differ) is success.
NATIVE_DIFF = 'f() { git --no-pager diff --no-ext-diff --no-index -- "$2" "$5"; [ $? -le 1 ]; }; f'
# Per driver section: each setting that names a program, and what it is pinned to. An empty
# `process` is no long-running filter (measured on git 2.39); an empty textconv or external
# diff is a command git fails to run, hence `cat` and git's own diff.
DRIVER_SETTINGS: dict[str, dict[str, str]] = {
    "filter": {"clean": "cat", "smudge": "cat", "process": "", "required": "false"},
    "diff": {"textconv": "cat", "command": NATIVE_DIFF},
    "merge": {"driver": "git merge-file -q %A %O %B"},
    "submodule": {"update": "checkout"},
    "tar": {"command": "gzip -cn"},
    # an empty cmd is no user tool, an empty path the tool's default (git-mergetool--lib)
    "difftool": {"cmd": "", "path": ""},
    "mergetool": {"cmd": "", "path": ""},
    "sendemail": {
        key.split(".", 1)[1]: value for key, value in GIT_GUARDS.items() if key.startswith("send")
    },
    "man": {"cmd": "man", "path": "man"},  # the man program, as for the default viewer
    "browser": {"cmd": "", "path": ""},  # git-web--browse: as for 'cmd' and 'path' unset
}
# Sections whose every entry is named by the agent: (kind, name) pins `<kind>.<name>` to the
# value: an alias to nothing ("'' is not a git command"), a command's pager to none.
ENTRY_SECTIONS = {"alias": "", "pager": "false"}
PACK_HOOK = ("uploadpack", "packobjectshook")  # pinned by NO_USER_CONFIG
# Settings out of the command scope's reach that run the file transport's programs or choose
# its URL (the docstring): (section, key) of any subsection; pinned by NO_FILE_TRANSPORT.
FILE_TRANSPORT_KEYS = frozenset(
    {
        ("remote", "uploadpack"),
        ("remote", "receivepack"),
        ("remote", "pushurl"),
        ("url", "pushinsteadof"),
    }
)
NO_FILE_TRANSPORT = ("protocol", "file")
CONFIG_NAMES = frozenset({"config", "config.worktree", ".gitconfig", "gitconfig"})
MAX_CONFIG_BYTES = 1 << 20
MAX_INCLUDES = 32
_HEADER = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\\n]|\\.)*)")?\s*\](.*)$')
_ENTRY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*))?$")


def is_config_file(path: str) -> bool:
    """A path git may read settings from (by its name; included files are followed)."""
    return posixpath.basename(path) in CONFIG_NAMES


def _value(raw: str) -> str:
    out, quoted = [], False
    for ch in raw.strip():
        if ch == '"':
            quoted = not quoted
            continue
        if ch in "#;" and not quoted:
            break
        out.append(ch)
    return "".join(out).strip()


def parse_config(text: str) -> tuple[set[tuple[str, str]], list[str]]:
    """(driver sections, include paths) of one git configuration file's text (pure).

    Sections are (kind, name) for the kinds of DRIVER_SETTINGS, in both header forms
    (`[filter "x"]` and the old `[filter.x]`), (kind, name) for each entry of ENTRY_SECTIONS,
    PACK_HOOK where the file sets one and NO_FILE_TRANSPORT where it sets one of
    FILE_TRANSPORT_KEYS; include paths are the `path` values of `[include]` and `[includeIf
    ...]` sections, as written."""
    sections: set[tuple[str, str]] = set()
    includes: list[str] = []
    current = ""
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header is not None:
            name, sub, line = header.group(1).lower(), header.group(2), header.group(3)
            if sub is None and "." in name:
                name, sub = name.split(".", 1)
            current = name
            if name in DRIVER_SETTINGS and sub is not None:
                sections.add((name, re.sub(r"\\(.)", r"\1", sub)))
        entry = _ENTRY.match(line)
        if entry is not None and current in ENTRY_SECTIONS:
            sections.add((current, entry.group(1).lower()))
        if entry is not None and (current, entry.group(1).lower()) == PACK_HOOK:
            sections.add(PACK_HOOK)
        if entry is not None and (current, entry.group(1).lower()) in FILE_TRANSPORT_KEYS:
            sections.add(NO_FILE_TRANSPORT)
        if entry is not None and current in ("include", "includeif"):
            if entry.group(1).lower() == "path" and entry.group(2):
                includes.append(_value(entry.group(2)))
    return sections, includes


def driver_sections(
    paths: Iterable[str], read: Callable[[str], bytes | None], *, home: str = "/root"
) -> set[tuple[str, str]]:
    """Driver sections defined in the configuration files `paths` (absolute sandbox paths the
    agent wrote) and the files they include, transitively; `read` returns a file's bytes (None
    when it is no regular file)."""
    found: set[tuple[str, str]] = set()
    queue = [p for p in paths if is_config_file(p)]
    seen, budget = set(queue), len(queue) + MAX_INCLUDES
    while queue and budget > 0:
        path, budget = queue.pop(0), budget - 1
        data = read(path)
        if data is None:
            continue
        sections, includes = parse_config(data[:MAX_CONFIG_BYTES].decode("utf-8", "replace"))
        found |= sections
        for inc in includes:
            if inc.startswith("~/"):
                inc = posixpath.join(home, inc[2:])
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), inc))
            if target not in seen:
                seen.add(target)
                queue.append(target)
    return found


def program_guards(guard_dir: str) -> dict[str, str]:
    """The gpg programs pinned to GUARD_FILES, staged in `guard_dir` (pure)."""
    gpg, gpgsm = f"{guard_dir}/gpg.sh", f"{guard_dir}/gpgsm.sh"
    return {"gpg.program": gpg, "gpg.openpgp.program": gpg, "gpg.x509.program": gpgsm}


def fixed_env(guard_dir: str) -> dict[str, str]:
    """GIT_GUARDS and `program_guards(guard_dir)` as command-scope settings in the
    environment, and GIT_ENV; and `safe.directory=*`: the judge reads the agent's
    repositories as data, owned by the agent's uid, and git refused them ("dubious
    ownership", exit 128: a version-control seed's oracle failed); what a repository's
    configuration could make git run is pinned here, so its owner is not the line of trust."""
    guards = GIT_GUARDS | program_guards(guard_dir) | {"safe.directory": "*"}
    env = {**GIT_ENV, "GIT_CONFIG_COUNT": str(len(guards))}
    for i, (key, value) in enumerate(guards.items()):
        env |= {f"GIT_CONFIG_KEY_{i}": key, f"GIT_CONFIG_VALUE_{i}": value}
    return env


def guard_env(env: Mapping[str, str], sections: Iterable[tuple[str, str]]) -> dict[str, str]:
    """`env` with command-scope settings added after those it has (`GIT_CONFIG_COUNT`) that
    pin every program setting of `sections` (pure)."""
    out = dict(env)
    count = int(out.get("GIT_CONFIG_COUNT", "0") or 0)
    for kind, name in sorted(sections):
        if (kind, name) == PACK_HOOK:
            out |= NO_USER_CONFIG
            continue
        if (kind, name) == NO_FILE_TRANSPORT:
            allowed = out.get("GIT_ALLOW_PROTOCOL", GIT_ENV["GIT_ALLOW_PROTOCOL"]).split(":")
            out["GIT_ALLOW_PROTOCOL"] = ":".join(p for p in allowed if p != "file")
            continue
        if kind in ENTRY_SECTIONS:
            out[f"GIT_CONFIG_KEY_{count}"] = f"{kind}.{name}"
            out[f"GIT_CONFIG_VALUE_{count}"] = ENTRY_SECTIONS[kind]
            count += 1
            continue
        for key, value in DRIVER_SETTINGS[kind].items():
            out[f"GIT_CONFIG_KEY_{count}"] = f"{kind}.{name}.{key}"
            out[f"GIT_CONFIG_VALUE_{count}"] = value
            count += 1
    out["GIT_CONFIG_COUNT"] = str(count)
    return out
