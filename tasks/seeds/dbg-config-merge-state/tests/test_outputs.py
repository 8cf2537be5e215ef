import copy
import json
import os
import random
import shutil
import subprocess
import tempfile

TOOL = "/app/cfgtool"


def ref_merge(base, over):
    out = copy.deepcopy(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = ref_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def dump(obj):
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def expected_for(config_dir):
    base = json.load(open(os.path.join(config_dir, "base.json")))
    envs = sorted(f[:-5] for f in os.listdir(config_dir) if f.endswith(".json") and f != "base.json")
    return {e: dump(ref_merge(base, json.load(open(os.path.join(config_dir, e + ".json"))))) for e in envs}


def run(*args):
    return subprocess.run(["python3", "merge.py", *args], cwd=TOOL, capture_output=True, text=True, timeout=60)


def rand_value(rng, depth):
    r = rng.random()
    if depth < 3 and r < 0.35:
        return {f"k{rng.randint(0, 5)}": rand_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    if r < 0.5:
        return [rng.randint(0, 9) for _ in range(rng.randint(0, 3))]
    if r < 0.6:
        return None
    return rng.choice([rng.randint(0, 100), "s%d" % rng.randint(0, 9), True, False])


def random_configs(seed):
    rng = random.Random(seed)
    d = tempfile.mkdtemp()
    base = {f"k{i}": rand_value(rng, 0) for i in range(6)}
    base = {k: v for k, v in base.items() if v is not None}
    json.dump(base, open(os.path.join(d, "base.json"), "w"))
    for e in range(5):
        over = {f"k{rng.randint(0, 7)}": rand_value(rng, 0) for _ in range(5)}
        json.dump(over, open(os.path.join(d, f"env{e}.json"), "w"))
    return d


def test_rendered_shipped_configs():
    want = expected_for(os.path.join(TOOL, "configs"))
    for env, text in want.items():
        path = os.path.join(TOOL, "rendered", env + ".json")
        assert os.path.exists(path), f"{path} missing"
        assert open(path).read() == text, f"rendered/{env}.json is wrong"


def test_single_env_lists_replace_and_null_removes():
    want = expected_for(os.path.join(TOOL, "configs"))
    for env in ("dev", "staging", "prod"):
        r = run(env)
        assert r.returncode == 0, r.stderr[-400:]
        assert r.stdout == want[env], f"merge.py {env} output wrong"


def test_all_envs_no_state_leak_random():
    for seed in range(25):
        d = random_configs(seed)
        snapshot = {f: open(os.path.join(d, f)).read() for f in os.listdir(d)}
        out = tempfile.mkdtemp()
        r = run("--config-dir", d, "--all", "--out", out)
        assert r.returncode == 0, r.stderr[-400:]
        for env, text in expected_for(d).items():
            got = open(os.path.join(out, env + ".json")).read()
            assert got == text, f"seed {seed}: {env} differs from the reference merge"
        after = {f: open(os.path.join(d, f)).read() for f in os.listdir(d)}
        assert after == snapshot, "config files were modified"


def test_shipped_configs_untouched():
    base = json.load(open(os.path.join(TOOL, "configs", "base.json")))
    assert base["features"] == ["invoices", "refunds"] and base["db"]["pool"] == {"min": 1, "max": 5}
    assert base["log"] == {"level": "info", "targets": ["stdout"]}
