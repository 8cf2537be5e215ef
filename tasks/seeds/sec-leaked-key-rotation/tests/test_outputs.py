import hashlib
import json
import os
import re
import stat
import subprocess

REPO = "/app/service"
KEY_RE = re.compile(r"sk_live_[0-9a-f]{32}")
MAIN_SUBJECTS = ["add health check", "move payment key out of the repo",
                 "document payment smoke test", "configure payment provider", "service skeleton"]
FEATURE_SUBJECTS = ["metrics: expose port", "metrics: counter stub", "document payment smoke test",
                    "configure payment provider", "service skeleton"]


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout


def sha(s):
    return hashlib.sha256(s.encode()).hexdigest()


def issued_hash(key_id):
    for line in open("/app/keyring/audit.log"):
        f = line.split()
        if len(f) >= 4 and f[1] == "issued" and f[2] == key_id:
            return f[3].removeprefix("sha256=")
    raise AssertionError(f"audit.log has no 'issued {key_id}' line")


def leaked():
    key = open("/app/leaked_key.txt").read().strip()
    assert KEY_RE.fullmatch(key), f"not a key: {key!r}"
    return key


def new_key():
    text = open(os.path.join(REPO, "secrets.env")).read()
    m = re.fullmatch(r"PAYMENT_API_KEY=(sk_live_[0-9a-f]{32})\n?", text)
    assert m, f"secrets.env has the wrong format: {text!r}"
    return m.group(1)


def test_leaked_key_identified():
    assert sha(leaked()) == issued_hash("prod-2024-01"), "leaked_key.txt is not the prod-2024-01 key"


def test_secrets_file_rotated_and_private():
    key = new_key()
    assert sha(key) != issued_hash("prod-2024-01"), "secrets.env still holds the leaked key"
    mode = stat.S_IMODE(os.stat(os.path.join(REPO, "secrets.env")).st_mode)
    assert mode == 0o600, f"mode {oct(mode)}"
    assert git("ls-files", "secrets.env") == "", "secrets.env is tracked"
    r = subprocess.run(["git", "-C", REPO, "check-ignore", "-q", "secrets.env"])
    assert r.returncode == 0, "secrets.env is not ignored"


def test_keyring_updated():
    keys = {k["id"]: k for k in json.load(open("/app/keyring/keys.json"))}
    assert keys["prod-2024-01"]["status"] == "revoked", keys["prod-2024-01"]
    assert keys["prod-2024-01"]["sha256"] == issued_hash("prod-2024-01")
    assert keys["prod-2023-07"]["status"] == "revoked"
    assert keys["prod-2024-02"]["status"] == "active"
    assert keys["prod-2024-02"]["sha256"] == sha(new_key()), "prod-2024-02 hash != secrets.env key"
    assert [k for k in keys.values() if k["status"] == "active"] == [keys["prod-2024-02"]]


def test_leaked_key_purged_from_all_objects():
    assert sha(leaked()) == issued_hash("prod-2024-01"), "leaked_key.txt is not the leaked key"
    key = leaked().encode()
    dump = subprocess.run(["git", "-C", REPO, "cat-file", "--batch-all-objects", "--batch"],
                          capture_output=True, check=True).stdout
    assert key not in dump, "the leaked key is still stored in a git object"
    gitdir = os.path.join(REPO, ".git")
    for root, dirs, files in os.walk(gitdir):
        dirs[:] = [d for d in dirs if os.path.join(root, d) != os.path.join(gitdir, "objects")]
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                assert key not in fh.read(), f"leaked key found in {os.path.join(root, f)}"


def test_history_shape_preserved():
    assert git("log", "--format=%s", "main").splitlines() == MAIN_SUBJECTS
    assert git("log", "--format=%s", "feature/metrics").splitlines() == FEATURE_SUBJECTS
    assert git("log", "-1", "--format=%s", "v1.0^{commit}").strip() == "document payment smoke test"
    settings = git("show", "feature/metrics:config/settings.env")
    for line in ("LOG_LEVEL=info", "REGION=eu-west-1", "PAYMENT_TIMEOUT=15", "METRICS_PORT=9100"):
        assert line in settings.splitlines(), f"{line} lost from feature/metrics"


def test_main_tip_unchanged_and_clean():
    assert git("rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert git("status", "--porcelain") == "", "working tree not clean"
    assert git("show", "main:config/settings.env") == "LOG_LEVEL=info\nREGION=eu-west-1\nPAYMENT_TIMEOUT=15\n"
    assert "$PAYMENT_API_KEY" in git("show", "main:PAYMENTS.md")
    assert git("show", "main:.gitignore") == "secrets.env\n"
    assert "def healthy():" in git("show", "main:app.py")
