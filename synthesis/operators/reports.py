"""Aggregation reports: line/word/byte counts and a size summary of the task's results."""

from __future__ import annotations

from synthesis.operators.extension import Extension, Operator, Parent, RewriteContext, render_tests

_WC_TESTS = """
_@T@_SPEC = @SPEC@


def test_@T@_counts_report():
    import os

    spec = _@T@_SPEC
    want = ["path\\tlines\\twords\\tbytes"]
    for rel in sorted(spec["files"]):
        with open(os.path.join(spec["root"], rel), "rb") as f:
            data = f.read()
        newlines, words = data.count(b"\\n"), len(data.split())
        want.append(f"{rel}\\t{newlines}\\t{words}\\t{len(data)}")
    with open(spec["report"]) as f:
        text = f.read()
    assert text.endswith("\\n") and "\\r" not in text, "Unix newlines, newline-terminated"
    got = text.splitlines()
    assert got == want, f"expected {want!r}, got {got!r}"
"""

_SIZE_TESTS = """
_@T@_SPEC = @SPEC@


def test_@T@_size_summary():
    import json
    import os

    spec = _@T@_SPEC
    sizes = {r: os.path.getsize(os.path.join(spec["root"], r)) for r in spec["files"]}
    order = sorted(sizes, key=lambda r: (sizes[r], r))
    want = {
        "files": len(sizes),
        "total_bytes": sum(sizes.values()),
        "largest": sorted(sizes, key=lambda r: (-sizes[r], r))[0],
        "smallest": order[0],
    }
    with open(spec["report"]) as f:
        got = json.load(f)
    assert got == want, f"expected {want!r}, got {got!r}"
"""


class WcReport(Operator):
    name = "wc_report"
    family = "aggregation_report"
    kinds = ("text", "csv", "json")
    max_outputs = 4

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        rels = [f.rel for f in self.pick(parent, ctx)]
        report = f"{wd}/reports/counts_{tag}.tsv"
        files = ", ".join(f"`{r}`" for r in rels)
        return Extension(
            title="report line, word and byte counts",
            steps=[
                f"mkdir -p {wd}/reports",
                f"printf 'path\\tlines\\twords\\tbytes\\n' > {report}",
                f"for f in {' '.join(rels)}; do",
                '  l=$(LC_ALL=C wc -l < "$f"); w=$(LC_ALL=C wc -w < "$f"); c=$(wc -c < "$f")',
                f"  printf '%s\\t%s\\t%s\\t%s\\n' \"$f\" $l $w $c >> {report}",
                "done",
            ],
            tests=render_tests(_WC_TESTS, tag, {"root": wd, "files": rels, "report": report}),
            text=(
                f"Write the tab-separated report `{report}`: "
                "the header line `path lines words bytes` (the four names separated by single "
                "tab characters), then one line per file "
                f"below (paths relative to `{wd}`, sorted by path): {files}. The counts are "
                "those of `LC_ALL=C wc -l`, `wc -w` and `wc -c` on the file's final content "
                "(newline characters, whitespace-separated words, bytes). Unix newlines, "
                "newline-terminated."
            ),
            requires=["wc"],
            consumes=[f"{wd}/{r}" for r in rels],
            creates=[report],
        )


class SizeSummary(Operator):
    name = "size_summary"
    family = "aggregation_report"
    min_outputs = 2
    max_outputs = 4

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        rels = [f.rel for f in self.pick(parent, ctx)]
        report = f"{wd}/reports/sizes_{tag}.json"
        files = ", ".join(f"`{r}`" for r in rels)
        return Extension(
            title="summarise the sizes of the results",
            steps=[
                f"mkdir -p {wd}/reports",
                "python3 - <<'PY'",
                "import json, os",
                f"root, files = {wd!r}, {rels!r}",
                "sizes = {r: os.path.getsize(os.path.join(root, r)) for r in files}",
                "largest = sorted(sizes, key=lambda r: (-sizes[r], r))[0]",
                "smallest = sorted(sizes, key=lambda r: (sizes[r], r))[0]",
                "doc = {'files': len(sizes), 'total_bytes': sum(sizes.values()),",
                "       'largest': largest, 'smallest': smallest}",
                f"json.dump(doc, open({report!r}, 'w'), indent=2)",
                "PY",
            ],
            tests=render_tests(_SIZE_TESTS, tag, {"root": wd, "files": rels, "report": report}),
            text=(
                f"Write `{report}`: a JSON object with exactly "
                'the keys `"files"` (how many files), `"total_bytes"` (sum of their sizes), '
                '`"largest"` and `"smallest"` (the path of the largest and of the smallest '
                "file; ties go to the path that sorts first) over the final versions of these "
                f"files, paths relative to `{wd}` as written here: {files}."
            ),
            requires=["python3"],
            consumes=[f"{wd}/{r}" for r in rels],
            creates=[report],
        )


OPERATORS: list[Operator] = [WcReport(), SizeSummary()]
