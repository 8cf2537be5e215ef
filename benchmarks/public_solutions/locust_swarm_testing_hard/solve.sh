#!/bin/bash
# Validate the swarm against the spec from its configuration.  A worker node counts as
# configured when it has its own worker config (config/worker*.conf with a [worker]
# section pointing at the master port); the swarm_config.yaml inventory and the start
# script are cross-checked and reported, but a node listed there with no worker
# config of its own is not a configured worker.
mkdir -p /home/agent
cat > /tmp/validate_swarm.py <<'PY'
import configparser
import glob
import json
import os
import re
import subprocess

BASE = "/opt/locust_swarm"
REQ = {"host": "http://api.example.local:8080", "workers": 4, "users": 1000,
       "spawn_rate": 50, "run_time": 300, "master_port": 5557}


def read_ini(path):
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.read(path)
    return cp


def seconds(v):
    """locust run-time: '300', '300s', '5m', '1h30m' -> seconds"""
    v = str(v).strip()
    if re.fullmatch(r"\d+", v):
        return int(v)
    total = 0
    for n, unit in re.findall(r"(\d+)\s*([hms])", v):
        total += int(n) * {"h": 3600, "m": 60, "s": 1}[unit]
    return total or None


problems = []

# --- master configuration -------------------------------------------------
master = read_ini(os.path.join(BASE, "config/locust_master.conf"))
m = master["master"] if master.has_section("master") else {}
host = m.get("host", "")
port = int(m.get("port", m.get("master-bind-port", "0")) or 0)
users = int(m.get("users", "0") or 0)
spawn = float(m.get("spawn-rate", "0") or 0)
run_time = seconds(m.get("run-time", "0"))
expect = int(m.get("expect-workers", "0") or 0)

# the start script's flags override the config file when the master is launched
start = open(os.path.join(BASE, "start_master.sh")).read() if os.path.exists(os.path.join(BASE, "start_master.sh")) else ""
flag = lambda name: (re.search(rf"--{name}[ =](\S+)", start) or [None, None])[1]
host = flag("host") or host
port = int(flag("master-bind-port") or port)
users = int(flag("users") or users)
spawn = float(flag("spawn-rate") or spawn)
run_time = seconds(flag("run-time")) if flag("run-time") else run_time

if host.rstrip("/") != REQ["host"]:
    problems.append(f"target host is {host!r}")
if port != REQ["master_port"]:
    problems.append(f"master port is {port}")
if users != REQ["users"]:
    problems.append(f"users is {users}")
if spawn != REQ["spawn_rate"]:
    problems.append(f"spawn rate is {spawn}")
if run_time != REQ["run_time"]:
    problems.append(f"run time is {run_time}")

# --- workers ----------------------------------------------------------------
workers = set()
for path in sorted(glob.glob(os.path.join(BASE, "config/worker*.conf"))):
    cp = read_ini(path)
    if not cp.has_section("worker"):
        problems.append(f"{os.path.basename(path)} has no [worker] section")
        continue
    w = cp["worker"]
    wport = int(w.get("master-port", "0") or 0)
    if wport != port:
        problems.append(f"{os.path.basename(path)} points at master port {wport}")
        continue
    workers.add(w.get("worker-id", os.path.basename(path)))

inventory = []
yaml_path = os.path.join(BASE, "config/swarm_config.yaml")
if os.path.exists(yaml_path):
    inventory = re.findall(r"-\s*id:\s*\"?([\w-]+)", open(yaml_path).read())
missing = [w for w in inventory if w not in workers]
if missing:
    problems.append(f"workers listed in swarm_config.yaml without a worker config: {missing}")

try:
    running = subprocess.run(["pgrep", "-fc", "locust.*--worker"], capture_output=True, text=True).stdout.strip()
except FileNotFoundError:
    running = "?"

n_workers = len(workers)
if n_workers < REQ["workers"]:
    problems.append(f"only {n_workers} worker nodes configured (need {REQ['workers']})")
if expect and expect > n_workers:
    problems.append(f"master expects {expect} workers but {n_workers} are configured")

result = {"workers_configured": n_workers, "config_valid": not problems, "target_host": host}
with open("/home/agent/swarm_validation.json", "w") as f:
    json.dump(result, f, indent=2)
print(json.dumps(result, indent=2))
print("running worker processes:", running)
for p in problems:
    print("problem:", p)
PY
python3 /tmp/validate_swarm.py
