"""Format conversion: a CSV result as JSON records, a JSON result as a flat key/value CSV."""

from __future__ import annotations

import posixpath

from synthesis.operators.extension import Extension, Operator, Parent, RewriteContext, render_tests

_CSV_JSON_TESTS = """
_@T@_SPEC = @SPEC@


def test_@T@_json_is_array_of_objects():
    import csv
    import json

    spec = _@T@_SPEC
    with open(spec["src"], newline="") as f:
        rows = sum(1 for _ in csv.DictReader(f))
    with open(spec["dst"]) as f:
        doc = json.load(f)
    assert isinstance(doc, list), type(doc).__name__
    assert all(isinstance(r, dict) for r in doc), "every element must be an object"
    assert len(doc) == rows, f"{len(doc)} objects for {rows} CSV data rows"


def test_@T@_json_records_match_csv():
    import csv
    import json

    spec = _@T@_SPEC
    with open(spec["src"], newline="") as f:
        want = [dict(r) for r in csv.DictReader(f)]
    with open(spec["dst"]) as f:
        got = json.load(f)
    assert len(got) == len(want), f"{len(got)} records, CSV has {len(want)} rows"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"record {i}: expected {w!r}, got {g!r}"
"""

_FLAT_TESTS = """
_@T@_SPEC = @SPEC@


def _@T@_leaves(value, prefix=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _@T@_leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _@T@_leaves(v, f"{prefix}.{i}" if prefix else str(i))
    else:
        yield prefix, value


def _@T@_rows():
    import csv

    with open(_@T@_SPEC["dst"], newline="") as f:
        return list(csv.reader(f))


def test_@T@_flat_csv_header_and_order():
    rows = _@T@_rows()
    assert rows and rows[0] == ["key", "value"], rows[:1]
    keys = [r[0] for r in rows[1:]]
    assert keys == sorted(keys), "rows are not sorted by key"


def test_@T@_flat_csv_values():
    import json

    with open(_@T@_SPEC["src"]) as f:
        want = dict(_@T@_leaves(json.load(f)))
    rows = _@T@_rows()[1:]
    assert all(len(r) == 2 for r in rows), "every row needs exactly two fields"
    got = dict(rows)
    assert len(got) == len(rows), "duplicate keys"
    assert sorted(got) == sorted(want), f"keys differ: {sorted(set(got) ^ set(want))[:5]}"
    for key, leaf in want.items():
        if isinstance(leaf, str):
            assert got[key] == leaf, (key, got[key], leaf)
        else:
            assert json.loads(got[key]) == leaf, (key, got[key], leaf)
"""


def _sibling(path: str, tag: str, suffix: str) -> str:
    stem = posixpath.splitext(path)[0]
    return f"{stem}_{tag}{suffix}"


class CsvToJson(Operator):
    name = "csv_to_json"
    family = "format_conversion"
    kinds = ("csv",)
    max_lines = 20_000

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        src = self.pick(parent, ctx, 1)[0].path
        dst = _sibling(src, ctx.tag, ".json")
        return Extension(
            title="convert the CSV results to JSON records",
            steps=[
                "python3 - <<'PY'",
                "import csv, json",
                f"with open({src!r}, newline='') as f:",
                "    rows = list(csv.DictReader(f))",
                f"with open({dst!r}, 'w') as f:",
                "    json.dump(rows, f, indent=2)",
                "PY",
            ],
            tests=render_tests(_CSV_JSON_TESTS, ctx.tag, {"src": src, "dst": dst}),
            text=(
                f"Convert the final `{src}` into `{dst}`: a "
                "JSON array with one object per data row of the CSV (header excluded), in file "
                "order. Each object maps every header field name to that row's value as a JSON "
                "string, exactly as it appears in the CSV (no type conversion, no trimming)."
            ),
            requires=["python3"],
            consumes=[src],
            creates=[dst],
        )


class JsonFlattenCsv(Operator):
    name = "json_flatten_csv"
    family = "format_conversion"
    kinds = ("json",)

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        src = self.pick(parent, ctx, 1)[0].path
        dst = _sibling(src, ctx.tag, "_flat.csv")
        return Extension(
            title="flatten the JSON results into a key/value CSV",
            steps=[
                "python3 - <<'PY'",
                "import csv, json",
                "def leaves(v, p=''):",
                "    if isinstance(v, (dict, list)):",
                "        items = v.items() if isinstance(v, dict) else enumerate(v)",
                "        for k, x in items:",
                "            yield from leaves(x, f'{p}.{k}' if p else str(k))",
                "    else:",
                "        yield p, v if isinstance(v, str) else json.dumps(v)",
                f"rows = sorted(leaves(json.load(open({src!r}))))",
                f"with open({dst!r}, 'w', newline='') as f:",
                "    w = csv.writer(f, lineterminator='\\n')",
                "    w.writerow(['key', 'value'])",
                "    w.writerows(rows)",
                "PY",
            ],
            tests=render_tests(_FLAT_TESTS, ctx.tag, {"src": src, "dst": dst}),
            text=(
                f"Write `{dst}` from the final `{src}`: a CSV "
                "with the header line `key,value` and one row per leaf value (a string, "
                "number, boolean or null) of the JSON document. `key` is the path to the leaf: "
                "object keys and array indices (0-based) joined with `.` (e.g. `a.b.0.c`). "
                "`value` is the leaf itself for strings, and the JSON literal otherwise (e.g. "
                "`3.5`, `true`, `null`). Empty objects and arrays produce no rows. Sort rows by "
                "key (plain string order); standard CSV quoting, Unix newlines."
            ),
            requires=["python3"],
            consumes=[src],
            creates=[dst],
        )


OPERATORS: list[Operator] = [CsvToJson(), JsonFlattenCsv()]
