import json
import os
import stat
import subprocess
import sys

CONFIG = "/app/mqrelay/config.json"
VALIDATOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "validate.py")


def cfg():
    with open(CONFIG) as f:
        return json.load(f)


def routes():
    return [(r["prefix"], r["upstream"]) for r in cfg()["routes"]]


def test_validator_accepts_config():
    r = subprocess.run([sys.executable, VALIDATOR, CONFIG], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "OK", r.stdout[-800:]


def test_listen_workers_and_log_settings():
    c = cfg()
    assert c["listen"] == {"host": "0.0.0.0", "port": 8443}, c["listen"]
    assert c["workers"] == 4 and type(c["workers"]) is int
    assert c["log"]["level"] == "WARNING"
    assert c["log"]["file"] == "/app/mqrelay/logs/relay.log"
    assert os.path.isdir("/app/mqrelay/logs")


def test_billing_routed_to_billing_v2():
    c = cfg()
    assert ("/billing", "billing-v2") in routes(), routes()
    assert c["upstreams"]["billing-v2"]["url"] == "http://10.0.0.12:9100"
    assert "billing" not in c["upstreams"] and "billing_v2" not in c["upstreams"]


def test_single_api_route_to_api():
    assert [u for p, u in routes() if p == "/api"] == ["api"], routes()
    assert "legacy" not in cfg()["upstreams"]


def test_reports_upstream_added_and_others_kept():
    c = cfg()
    assert ("/reports", "reporting") in routes()
    assert c["upstreams"]["reporting"] == {"url": "http://10.0.0.20:7000", "timeout_ms": 10000}
    assert ("/static", "cdn") in routes() and ("/auth", "auth") in routes()
    assert c["upstreams"]["auth"]["timeout_ms"] == 3000
    assert c["upstreams"]["cdn"]["url"] == "http://cdn.internal:80"
    assert len(routes()) == 5, routes()


def test_tls_enabled_with_private_key():
    tls = cfg()["tls"]
    assert tls == {"enabled": True, "cert": "/app/mqrelay/tls/relay.crt",
                   "key": "/app/mqrelay/tls/relay.key"}, tls
    mode = stat.S_IMODE(os.stat(tls["key"]).st_mode)
    assert mode & 0o077 == 0, f"key mode {oct(mode)}"
    with open(tls["key"]) as f:
        assert "PRIVATE KEY" in f.read(), "the key file must still hold the private key"
