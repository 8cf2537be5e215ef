import glob
import json
import math
from collections import defaultdict


def truth():
    variants, bought, amount, seen = defaultdict(set), set(), defaultdict(float), set()
    for path in glob.glob("/app/events/*.jsonl"):
        with open(path) as f:
            for line in f:
                e = json.loads(line)
                seen.add(e["user"])
                if e["type"] == "assign":
                    variants[e["user"]].add(e["variant"])
                elif e["type"] == "purchase":
                    bought.add(e["user"])
                    amount[e["user"]] += e["amount"]
    internal = {u for u in seen if u.startswith("qa-")}
    both = {u for u, v in variants.items() if len(v) == 2} - internal
    groups = {g: [u for u, v in variants.items() if v == {g} and u not in internal] for g in "AB"}
    stats = {}
    for g, users in groups.items():
        conv = sum(u in bought for u in users)
        stats[g] = {"users": len(users), "conversions": conv, "conversion_rate": conv / len(users),
                    "revenue": sum(amount[u] for u in users)}
    a, b = stats["A"], stats["B"]
    p = (a["conversions"] + b["conversions"]) / (a["users"] + b["users"])
    lift = b["conversion_rate"] - a["conversion_rate"]
    z = lift / math.sqrt(p * (1 - p) * (1 / a["users"] + 1 / b["users"]))
    return len(internal), len(both), stats, lift, z, math.erfc(abs(z) / math.sqrt(2))


def result():
    with open("/app/ab_result.json") as f:
        return json.load(f)


def test_exclusions():
    internal, both, *_ = truth()
    assert result()["excluded_users"] == {"internal": internal, "both_variants": both}


def test_variant_counts():
    _, _, stats, *_ = truth()
    r = result()
    for g in "AB":
        assert r[g]["users"] == stats[g]["users"], (g, r[g]["users"], stats[g]["users"])
        assert r[g]["conversions"] == stats[g]["conversions"], (g, r[g], stats[g])


def test_rates_and_revenue():
    _, _, stats, lift, _, _ = truth()
    r = result()
    for g in "AB":
        assert abs(r[g]["conversion_rate"] - stats[g]["conversion_rate"]) <= 1e-6, g
        assert abs(r[g]["revenue"] - stats[g]["revenue"]) <= 0.01, (g, r[g]["revenue"])
    assert abs(r["absolute_lift"] - lift) <= 1e-6, r["absolute_lift"]


def test_z_test():
    *_, z, pv = truth()
    r = result()
    assert abs(r["z"] - z) <= 1e-6, (r["z"], z)
    assert abs(r["p_value"] - pv) <= 1e-6, (r["p_value"], pv)
    assert r["significant"] is (pv < 0.05), r["significant"]
