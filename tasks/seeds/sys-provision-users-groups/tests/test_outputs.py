import csv
import grp
import os
import pwd
import stat

SPEC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "provision")


def rows(name):
    with open(os.path.join(SPEC, name), newline="") as f:
        return list(csv.DictReader(f))


def test_groups_have_exact_gids():
    for g in rows("groups.csv"):
        entry = grp.getgrnam(g["name"])
        assert entry.gr_gid == int(g["gid"]), f"group {g['name']} has gid {entry.gr_gid}"


def test_users_uid_primary_group_shell_home():
    for u in rows("users.csv"):
        pw = pwd.getpwnam(u["name"])
        assert pw.pw_uid == int(u["uid"]), f"{u['name']}: uid {pw.pw_uid}"
        assert pw.pw_gid == grp.getgrnam(u["primary_group"]).gr_gid, f"{u['name']}: primary group"
        assert pw.pw_shell == u["shell"], f"{u['name']}: shell {pw.pw_shell}"
        assert pw.pw_dir == u["home"], f"{u['name']}: home {pw.pw_dir}"


def test_supplementary_memberships_exact():
    managed = [g["name"] for g in rows("groups.csv")]
    for u in rows("users.csv"):
        want = {g for g in u["groups"].split(";") if g}
        have = {g for g in managed if u["name"] in grp.getgrnam(g).gr_mem}
        assert have == want, f"{u['name']}: supplementary groups {sorted(have)}, want {sorted(want)}"


def test_home_directories():
    for u in rows("users.csv"):
        if u["create_home"] == "yes":
            st = os.stat(u["home"])
            assert stat.S_ISDIR(st.st_mode), f"{u['home']} is not a directory"
            assert st.st_uid == int(u["uid"]), f"{u['home']} owner"
            assert st.st_gid == grp.getgrnam(u["primary_group"]).gr_gid, f"{u['home']} group"
            assert stat.S_IMODE(st.st_mode) == 0o750, f"{u['home']} mode {oct(st.st_mode)}"
        else:
            assert not os.path.exists(u["home"]), f"{u['home']} must not exist"


def test_removed_accounts_gone():
    with open(os.path.join(SPEC, "remove.txt")) as f:
        names = [n.strip() for n in f if n.strip()]
    for name in names:
        assert name not in {p.pw_name for p in pwd.getpwall()}, f"user {name} still exists"
        assert name not in {g.gr_name for g in grp.getgrall()}, f"group {name} still exists"
        assert not os.path.exists(f"/home/{name}"), f"/home/{name} still exists"


def test_directories_owner_group_mode():
    for d in rows("dirs.csv"):
        st = os.stat(d["path"])
        assert stat.S_ISDIR(st.st_mode), f"{d['path']} is not a directory"
        assert st.st_uid == pwd.getpwnam(d["owner"]).pw_uid, f"{d['path']} owner"
        assert st.st_gid == grp.getgrnam(d["group"]).gr_gid, f"{d['path']} group"
        mode = stat.S_IMODE(st.st_mode)
        assert mode == int(d["mode"], 8), f"{d['path']} mode {oct(mode)}, want {d['mode']}"
