#!/usr/bin/env python3
"""Validate an mqrelay configuration file. Usage: validate.py [CONFIG] (default: config.json
next to this script). Prints one line per problem and exits 1 if there is any, else prints OK."""
import json
import os
import re
import stat
import sys

LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR"}


def problems(cfg):
    out = []

    def need(cond, msg):
        if not cond:
            out.append(msg)
        return cond

    listen = cfg.get("listen")
    if need(isinstance(listen, dict), "listen: missing object"):
        need(isinstance(listen.get("host"), str) and listen.get("host"), "listen.host: non-empty string")
        port = listen.get("port")
        need(type(port) is int and 1 <= port <= 65535, "listen.port: integer 1-65535")
    workers = cfg.get("workers")
    need(type(workers) is int and 1 <= workers <= 64, "workers: integer 1-64")
    log = cfg.get("log")
    if need(isinstance(log, dict), "log: missing object"):
        need(log.get("level") in LEVELS, f"log.level: one of {sorted(LEVELS)}")
        f = log.get("file")
        if need(isinstance(f, str) and f.startswith("/"), "log.file: absolute path"):
            need(os.path.isdir(os.path.dirname(f)), f"log.file: directory {os.path.dirname(f)} missing")
    ups = cfg.get("upstreams")
    if need(isinstance(ups, dict) and ups, "upstreams: non-empty object"):
        for name, u in ups.items():
            need(re.fullmatch(r"[a-z][a-z0-9-]*", name), f"upstreams.{name}: name must match [a-z][a-z0-9-]*")
            if need(isinstance(u, dict), f"upstreams.{name}: object"):
                need(isinstance(u.get("url"), str) and re.fullmatch(r"https?://[\w.-]+:\d+", u["url"]),
                     f"upstreams.{name}.url: http(s)://host:port")
                t = u.get("timeout_ms")
                need(type(t) is int and 100 <= t <= 60000, f"upstreams.{name}.timeout_ms: integer 100-60000")
    routes = cfg.get("routes")
    if need(isinstance(routes, list) and routes, "routes: non-empty list"):
        seen = set()
        for i, r in enumerate(routes):
            if not need(isinstance(r, dict), f"routes[{i}]: object"):
                continue
            p = r.get("prefix")
            need(isinstance(p, str) and p.startswith("/"), f"routes[{i}].prefix: must start with /")
            need(p not in seen, f"routes[{i}].prefix: duplicate {p}")
            seen.add(p)
            need(isinstance(ups, dict) and r.get("upstream") in ups,
                 f"routes[{i}].upstream: unknown upstream {r.get('upstream')!r}")
    tls = cfg.get("tls")
    if need(isinstance(tls, dict), "tls: missing object"):
        need(isinstance(tls.get("enabled"), bool), "tls.enabled: boolean")
        if tls.get("enabled") is True:
            for k in ("cert", "key"):
                need(isinstance(tls.get(k), str) and os.path.isfile(tls[k]), f"tls.{k}: file missing")
            if isinstance(tls.get("key"), str) and os.path.isfile(tls["key"]):
                mode = stat.S_IMODE(os.stat(tls["key"]).st_mode)
                need(mode & 0o077 == 0, f"tls.key: permissions {oct(mode)} too open (group/other access)")
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.json")
    try:
        with open(path) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        print(f"cannot load {path}: {e}")
        return 1
    if not isinstance(cfg, dict):
        print("top level: object expected")
        return 1
    errs = problems(cfg)
    for e in errs:
        print(e)
    if not errs:
        print("OK")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
