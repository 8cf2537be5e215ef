import atexit
import os
import signal
import subprocess
import time

CTL = "/app/daemon/heartbeatctl"
PIDFILE = "/app/daemon/run/heartbeatd.pid"
LOG = "/app/daemon/var/heartbeat.log"


def ctl(*args):
    return subprocess.run([CTL, *args], capture_output=True, text=True, timeout=20)


def daemon_pids():
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read().split(b"\0")
            except OSError:
                continue
            if any(a.endswith(b"heartbeatd.py") for a in cmd) and any(b"python" in a for a in cmd):
                with open(f"/proc/{d}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                        out.append(int(d))
    return out


def kill_all():
    for pid in daemon_pids():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


atexit.register(kill_all)


def reset():
    kill_all()
    time.sleep(0.2)
    if os.path.exists(PIDFILE):
        os.remove(PIDFILE)


def pidfile_pid():
    with open(PIDFILE) as f:
        text = f.read()
    assert text.strip().isdigit() and text.endswith("\n"), f"bad pidfile content {text!r}"
    return int(text)


def start_fresh():
    reset()
    r = ctl("start")
    assert r.returncode == 0, f"start exited {r.returncode}: {r.stderr[-300:]}"
    time.sleep(0.3)
    return r


def test_status_when_stopped_exits_3():
    reset()
    r = ctl("status")
    assert (r.returncode, r.stdout.strip()) == (3, "stopped"), (r.returncode, r.stdout)


def test_start_launches_detached_daemon_with_pidfile():
    r = start_fresh()
    pid = pidfile_pid()
    assert r.stdout.strip() == f"started (pid {pid})", r.stdout
    assert daemon_pids() == [pid], f"pidfile {pid}, daemons {daemon_pids()}"
    size = os.path.getsize(LOG)
    time.sleep(1.0)
    assert os.path.getsize(LOG) > size, "daemon is not writing heartbeats"


def test_second_start_does_not_duplicate():
    start_fresh()
    pid = pidfile_pid()
    r = ctl("start")
    assert r.returncode == 0 and r.stdout.strip() == f"already running (pid {pid})", r.stdout
    assert daemon_pids() == [pid] and pidfile_pid() == pid


def test_status_running():
    start_fresh()
    pid = pidfile_pid()
    r = ctl("status")
    assert (r.returncode, r.stdout.strip()) == (0, f"running (pid {pid})"), (r.returncode, r.stdout)


def test_stop_sends_sigterm_and_removes_pidfile():
    start_fresh()
    time.sleep(0.5)
    r = ctl("stop")
    assert r.returncode == 0 and r.stdout.strip() == "stopped", (r.returncode, r.stdout)
    assert daemon_pids() == [], "daemon still running after stop"
    assert not os.path.exists(PIDFILE), "pidfile not removed"
    with open(LOG) as f:
        assert f.read().splitlines()[-1] == "stopping", "daemon was not stopped with SIGTERM"
    r = ctl("stop")
    assert r.returncode == 0 and r.stdout.strip() == "not running", (r.returncode, r.stdout)


def test_stale_pidfile_handling():
    reset()
    p = subprocess.Popen(["true"])
    p.wait()
    os.makedirs(os.path.dirname(PIDFILE), exist_ok=True)
    with open(PIDFILE, "w") as f:
        f.write(f"{p.pid}\n")
    r = ctl("status")
    assert (r.returncode, r.stdout.strip()) == (1, "dead but pidfile exists"), (r.returncode, r.stdout)
    r = ctl("start")
    assert r.returncode == 0 and r.stdout.startswith("started"), r.stdout
    time.sleep(0.3)
    assert daemon_pids() == [pidfile_pid()]
    ctl("stop")


def test_restart_replaces_process():
    start_fresh()
    old = pidfile_pid()
    r = ctl("restart")
    assert r.returncode == 0, r.stderr
    new = pidfile_pid()
    time.sleep(0.3)
    assert new != old and daemon_pids() == [new], (old, new, daemon_pids())
    ctl("stop")


def test_usage_error_exits_2():
    for args in ((), ("bogus",)):
        r = ctl(*args)
        assert r.returncode == 2 and r.stderr.strip(), f"{args}: exit {r.returncode}"
    reset()
