#!/bin/bash
# Combinational equivalence by exhaustive simulation of both BLIF netlists (the
# shipped "abc" is a shell script comparing text signatures, not a real checker).
# Exhaustive simulation over every input vector is a complete proof => confidence high.
# Inputs are matched by name; outputs by position (the designs name them differently).
cd /workspace
mkdir -p /workspace/output
cat > /tmp/cec.py <<'PY'
import itertools
import sys


def parse_blif(path):
    lines, buf = [], ""
    for raw in open(path):
        line = raw.split("#", 1)[0].rstrip()
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        line = (buf + line).strip()
        buf = ""
        if line:
            lines.append(line)
    inputs, outputs, tables = [], [], []
    cur = None
    for line in lines:
        tok = line.split()
        if tok[0] == ".model":
            continue
        if tok[0] == ".inputs":
            inputs += tok[1:]
        elif tok[0] == ".outputs":
            outputs += tok[1:]
        elif tok[0] == ".names":
            cur = {"ins": tok[1:-1], "out": tok[-1], "rows": []}
            tables.append(cur)
        elif tok[0].startswith(".end"):
            cur = None
        elif tok[0].startswith("."):
            raise SystemExit(f"unsupported directive {tok[0]} in {path}")
        elif cur is not None:
            if len(cur["ins"]) == 0:
                cur["rows"].append(("", tok[0]))
            else:
                cur["rows"].append((tok[0], tok[1]))
    return inputs, outputs, tables


def evaluate(tables, assignment):
    vals = dict(assignment)
    pending = list(tables)
    while pending:
        progress = False
        rest = []
        for t in pending:
            if all(i in vals for i in t["ins"]):
                ins = [vals[i] for i in t["ins"]]
                on_rows = [r for r in t["rows"] if r[1] == "1"]
                off_rows = [r for r in t["rows"] if r[1] == "0"]
                match = lambda pat: all(p == "-" or int(p) == v for p, v in zip(pat, ins))
                if on_rows or not off_rows:
                    v = int(any(match(p) for p, _ in on_rows))
                else:  # table given as OFF-set
                    v = int(not any(match(p) for p, _ in off_rows))
                vals[t["out"]] = v
                progress = True
            else:
                rest.append(t)
        if not progress:
            raise SystemExit("combinational loop or undriven signal")
        pending = rest
    return vals


a_in, a_out, a_tab = parse_blif("/workspace/circuits/design_a.blif")
b_in, b_out, b_tab = parse_blif("/workspace/circuits/design_b.blif")
if sorted(a_in) != sorted(b_in) or len(a_out) != len(b_out):
    equivalent = False
    mismatch = "interfaces differ"
else:
    equivalent, mismatch = True, None
    for bits in itertools.product((0, 1), repeat=len(a_in)):
        asg = dict(zip(a_in, bits))
        va, vb = evaluate(a_tab, asg), evaluate(b_tab, asg)
        for oa, ob in zip(a_out, b_out):
            if va[oa] != vb[ob]:
                equivalent = False
                mismatch = f"{oa}/{ob} differ at {asg}: {va[oa]} vs {vb[ob]}"
                break
        if not equivalent:
            break

print("equivalent" if equivalent else f"NOT equivalent ({mismatch})", file=sys.stderr)
with open("/workspace/output/verification_result.txt", "w") as f:
    f.write(f"equivalent: {'yes' if equivalent else 'no'}\nconfidence: high\n")
PY
python3 /tmp/cec.py
cat /workspace/output/verification_result.txt
