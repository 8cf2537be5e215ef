#!/usr/bin/env python3
"""Render per-environment configs: configs/base.json deep-merged with configs/<env>.json.

usage: merge.py [--config-dir DIR] ENV          print the merged config of ENV
       merge.py [--config-dir DIR] --all --out DIR   write DIR/<env>.json for every env

Merge rules: objects merge recursively; any other override value (number, string, bool,
list) replaces the base value; a null override removes the key.
"""
import json
import os
import sys


def deep_merge(base, override, result={}):
    for k, v in base.items():
        result[k] = v
    for k, v in override.items():
        if isinstance(v, dict) and isinstance(result.get(k), dict):
            result[k] = deep_merge(result[k], v, result[k])
        elif isinstance(v, list) and isinstance(result.get(k), list):
            result[k] = result[k] + v
        else:
            result[k] = v
    return result


def load(path):
    with open(path) as f:
        return json.load(f)


def render(config_dir, env):
    base = load(os.path.join(config_dir, "base.json"))
    return deep_merge(base, load(os.path.join(config_dir, env + ".json")))


def dump(obj):
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def main(argv):
    config_dir = "configs"
    if argv[:1] == ["--config-dir"]:
        config_dir, argv = argv[1], argv[2:]
    if argv[:1] == ["--all"]:
        out = argv[argv.index("--out") + 1]
        os.makedirs(out, exist_ok=True)
        envs = sorted(f[:-5] for f in os.listdir(config_dir) if f.endswith(".json") and f != "base.json")
        for env in envs:
            with open(os.path.join(out, env + ".json"), "w") as f:
                f.write(dump(render(config_dir, env)))
        return 0
    sys.stdout.write(dump(render(config_dir, argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
