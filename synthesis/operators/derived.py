"""Work derived from what the parent actually produced: typed steps over its output's columns,
keys and values, composed into one stage whose instruction states the goal, not a command.

Each operator reads a parent output as a typed table (`synthesis.operators.tables`) and
composes two or three typed steps over it (an aggregation, with a selection before it or a
summary after it, or both), each writing one file checked by one new test:

1. a selection (optional): the records whose category is a value the data holds, whose
   measure exceeds a value between the data's own, whose line holds a word some lines hold,
   the entries under one of the document's sections, the numeric entries;
2. an aggregation of the selected records: a count, total or maximum of a measure per
   category, statistics of a measure, the distinct values of a column, the top k by a
   measure, the frequent words, the selected entries as an object, the entries per section;
3. a summary of the aggregation (optional): the category with the largest value, the total.

Every value an instruction names (a column, a category value, a threshold, a section) is
drawn from the output's actual content, so the work exists only for this parent. Every test
recomputes what it expects from the parent's output at verify time, so the work is checked
on the real file, and the data-flow probe sees each new assertion depend on it. The output
formats (a JSON object, a CSV with a stated header, tab-separated or `key: value` lines, one
value a line) and the phrasing vary; numbers are compared to 0.01.

Operators, one family each: `record_query` (CSV, JSON records, separated fields: a
selection, grouped or overall figures, a summary), `record_ranking` (the top k by a measure,
then how many), `entry_query` (a JSON or INI document's entries), `text_query` (any text:
lines with a word, frequent words). The reference solution computes with Python (one
heredoc); an agent may use any tool.
"""

from __future__ import annotations

import posixpath
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from synthesis.operators.extension import (
    Extension,
    Operator,
    Parent,
    RewriteContext,
    RewriteError,
)
from synthesis.operators.tables import WORD, Column, Table, number, read_table
from synthesis.operators.tables import reader_source as _reader
from synthesis.profile import OutputFile

OUT_DIRS = ("derived", "analysis", "summaries", "reports", "insights", "extracts")


def _pick(rng: random.Random, options: list | tuple):  # noqa: ANN202 - any element type
    return options[rng.randrange(len(options))]


@dataclass
class Step:
    """One typed step: what it computes (`code`: Python over `rows`, or over the previous
    step's `result`, defining `result`), how its file is written and read back, its test
    and the sentence that states it."""

    kind: str  # select | aggregate | summary
    op: str
    out: str
    fmt: str  # rows | json | csv | tsv | colon | lines | jsonlist | scalar
    code: str
    phrase: str
    numeric: bool = False  # the result's values (or the scalar) are numbers
    header: tuple[str, str] = ("key", "value")
    title: str = ""
    column: str = ""  # a selection by value: the column it fixes (grouping by it is void)


@dataclass
class Plan:
    """A composed extension before rendering: its table(s), steps and title."""

    table: Table
    steps: list[Step] = field(default_factory=list)
    title: str = ""
    intro: str = ""


# ---- the steps: code, phrasing --------------------------------------------------------------

_SEL_VERB = (
    "Keep only the {noun} of {src} whose {col} is `{val}`",
    "Select the {noun} of {src} with {col} equal to `{val}`",
    "Extract from {src} the {noun} whose {col} is exactly `{val}`",
)
_THR_VERB = (
    "Keep only the {noun} of {src} whose {col} is greater than {thr}",
    "Select the {noun} of {src} with {col} above {thr}",
    "Extract from {src} the {noun} whose {col} exceeds {thr}",
)
_WORD_VERB = (
    "Collect the lines of {src} that contain the word `{val}`",
    "Extract every line of {src} in which `{val}` occurs as a whole word",
    "Keep only the lines of {src} mentioning `{val}` (as a whole word)",
)
_PREFIX_VERB = (
    "Collect the entries of {src} under `{val}` (key paths starting with `{val}.`)",
    "Select the entries of {src} whose key path starts with `{val}.`",
)
_NUMERIC_VERB = (
    "Collect the entries of {src} whose value is a number",
    "Select the numeric entries of {src} (values that are numbers)",
)


def introduce(t: Table, rng: random.Random) -> str:
    """The sentence saying how the source reads (its form), in one of a few phrasings."""
    src = f"`{t.path}`"
    if t.form == "csv":
        head = f"`{','.join(t.header)}`"
        return _pick(
            rng,
            (
                f"{src} is a CSV file with the header {head}.",
                f"Work from the CSV file {src} (header {head}).",
                f"The records of {src} are CSV rows under the header {head}.",
            ),
        )
    if t.form == "json_records":
        return _pick(
            rng,
            (
                f"{src} holds a JSON array of objects, each a record.",
                f"Each object of the JSON array in {src} is a record.",
            ),
        )
    if t.form == "fields":
        return _pick(
            rng,
            (
                f"Each non-empty line of {src} that does not start with `#` is a record of "
                f"{t.sep_name}-separated fields, numbered from 1.",
                f"Read {src} as records: one per line ({t.sep_name}-separated fields, numbered "
                "from 1; blank lines and lines starting with `#` are not records).",
            ),
        )
    if t.form == "entries" and t.source == "json":
        return _pick(
            rng,
            (
                f"Read {src} as entries: every leaf value of the JSON document with its key path "
                "(object keys and array indices joined with `.`, e.g. `a.b.0`).",
                f"The entries of {src} are the leaf values of its JSON document, each with its "
                "key path (keys and array indices joined with `.`, e.g. `a.b.0`).",
            ),
        )
    if t.form == "entries":
        return _pick(
            rng,
            (
                f"Read {src} as entries: every `key = value` line with its key path (`section.key` "
                "under a `[section]` header); comments and blank lines are not entries.",
                f"The entries of {src} are its `key = value` lines, each with the key path "
                "`section.key` (the `[section]` header above it); comments and blank lines do not "
                "count.",
            ),
        )
    return _pick(
        rng,
        (
            f"Every non-empty line of {src} is a record.",
            f"Treat each non-empty line of {src} as one record.",
        ),
    )


def _rows_format(t: Table) -> str:
    if t.form == "csv":
        return "a CSV file with the same header, the records in their original order"
    if t.form == "json_records":
        return "a JSON array of the same objects, in their original order"
    if t.form == "entries" and t.source == "json":
        return "a JSON object mapping each key path to its value (as the document has it)"
    if t.form == "entries":
        return "a JSON object mapping each key path to its value (a string)"
    return "the selected lines exactly as they are, in their original order"


def select_step(plan: Plan, rng: random.Random, out: str, src: str) -> Step | None:
    """A selection over values the table actually holds (None when none is fit)."""
    t = plan.table
    rows = t.rows
    options: list[Step] = []
    for col in t.of("category") if t.form != "lines" else []:
        counts = Counter(col.values)
        vals = [v for v, n in counts.items() if 0 < n < len(rows) and n >= 2] or [
            v for v, n in counts.items() if 0 < n < len(rows)
        ]
        if vals:
            val = _pick(rng, sorted(vals))
            code = f"result = [(f, r) for f, r in rows if f[{col.name!r}] == {val!r}]\n"
            text = _pick(rng, _SEL_VERB).format(src=src, col=t.label(col), val=val, noun=t.noun)
            options.append(Step("select", "eq", out, "rows", code, text, title=f"the {val} records",
                                column=col.name))  # fmt: skip
    for col in t.of("measure"):
        nums = sorted({number(v) or 0.0 for v in col.values})
        if len(nums) >= 3:
            thr = nums[len(nums) // 2 - (1 if len(nums) % 2 == 0 else 0)]
            shown = int(thr) if thr.is_integer() else thr
            code = f"result = [(f, r) for f, r in rows if float(f[{col.name!r}]) > {shown!r}]\n"
            text = _pick(rng, _THR_VERB).format(src=src, col=t.label(col), thr=shown, noun=t.noun)
            options.append(Step("select", "gt", out, "rows", code, text,
                                title=f"the records above {shown}"))  # fmt: skip
    if t.form == "lines":
        freq = Counter(w for r in rows for w in set(WORD.findall(r["line"])))
        words = sorted(w for w, n in freq.items() if 2 <= n <= len(rows) - 1)
        if words:
            val = _pick(rng, words)
            code = (
                "import re\n"
                f"result = [(f, r) for f, r in rows if re.search(r'\\b' + {val!r} + r'\\b', "
                "f['line'])]\n"
            )
            text = _pick(rng, _WORD_VERB).format(src=src, val=val)
            options.append(Step("select", "word", out, "rows", code, text,
                                title=f"the lines about {val}"))  # fmt: skip
    if t.form == "entries":
        tops = Counter(r["key"].split(".")[0] for r in rows if "." in r["key"])
        secs = sorted(s for s, n in tops.items() if 2 <= n < len(rows))
        if secs:
            val = _pick(rng, secs)
            code = f"result = [(f, r) for f, r in rows if f['key'].startswith({val + '.'!r})]\n"
            text = _pick(rng, _PREFIX_VERB).format(src=src, val=val)
            options.append(Step("select", "prefix", out, "rows", code, text,
                                title=f"the {val} settings"))  # fmt: skip
        numeric_rows = [r for r in rows if number(r["value"]) is not None]
        if 2 <= len(numeric_rows) < len(rows):
            code = (
                "def _num(v):\n"
                "    try:\n"
                "        float(v)\n"
                "        return v.strip().lower() not in ('nan', 'inf', '-inf', 'infinity')\n"
                "    except ValueError:\n"
                "        return False\n\n"
                "result = [(f, r) for f, r in rows if _num(f['value'])]\n"
            )
            text = _pick(rng, _NUMERIC_VERB).format(src=src)
            options.append(Step("select", "numeric", out, "rows", code, text,
                                title="the numeric settings"))  # fmt: skip
    if not options:
        return None
    step = _pick(rng, options)
    step.phrase += f" into `{out}`: {_rows_format(t)}."
    return step


# mapping formats: how a {key: value} result is written and described
_MAP_FORMATS = {
    "json": "a JSON object mapping each {k} to its {v}",
    "csv": "a CSV file with the header `{hk},{hv}` and one row per {k}, sorted by {k}",
    "tsv": "one line per {k}, sorted by {k}: the {k}, a tab, its {v}",
    "colon": "one line per {k}, sorted by {k}, written as `<{hk}>: <{hv}>`",
}


def _agg_options(t: Table, rng: random.Random, sel: Step | None) -> list[dict]:
    """The aggregations the (selected) records of `t` support, as step parameters (none
    that the selection makes void: grouping by the column it fixes, sections under one)."""
    rows = f"those {t.noun}" if sel is not None else f"its {t.noun}"
    out: list[dict] = []
    fixed = sel.column if sel is not None else ""
    cats = [c for c in t.of("category") if c.name != fixed] if t.form != "lines" else []
    measures = t.of("measure")
    for cat in cats:
        out.append({"op": "count_by", "cat": cat, "rows": rows})
        for m in measures:
            out.append({"op": "sum_by", "cat": cat, "m": m, "rows": rows})
            out.append({"op": "max_by", "cat": cat, "m": m, "rows": rows})
    for m in measures:
        out.append({"op": "stats", "m": m, "rows": rows})
        for key in t.of("key", "category"):
            out.append({"op": "top_k", "m": m, "key": key, "k": rng.randint(2, 4), "rows": rows})
    for col in t.of("category", "text"):
        if t.form != "lines" and col.name != fixed:
            out.append({"op": "distinct", "col": col, "rows": rows})
    if t.form == "lines":
        out.append({"op": "words", "k": rng.randint(3, 6), "rows": rows})
        out.append({"op": "distinct_words", "rows": rows})
    if t.form == "entries" and (sel is None or sel.op != "prefix"):
        out.append({"op": "sections", "rows": rows})
    return out


def _fmt_num(integral: bool) -> str:
    return "round(v)" if integral else "round(v, 2)"


_SUFFIX = {"json": ".json", "jsonlist": ".json", "csv": ".csv", "tsv": ".tsv"}


def agg_step(plan: Plan, p: dict, rng: random.Random, path: Callable[[str, str], str],
             src: str) -> Step:  # fmt: skip
    """The step computing aggregation `p` (see `_agg_options`); `path(op, fmt)` names its
    file; `src` names the records when no selection came first."""
    t, op = plan.table, p["op"]
    rows = p["rows"] if "those" in p["rows"] else f"the {t.noun} of {src}"
    if op in ("count_by", "sum_by", "max_by"):
        cat: Column = p["cat"]
        fmt = _pick(rng, list(_MAP_FORMATS))
        out = path(op, fmt)
        if op == "count_by":
            code = (
                "from collections import Counter\n"
                f"result = dict(Counter(f[{cat.name!r}] for f, _ in rows))\n"
            )
            what, hv, numeric_int = f"number of {t.noun}", "count", True
            goal = f"Count {rows} per {t.label(cat)}"
            title = f"count {t.noun} per {cat.name if t.form != 'fields' else 'field ' + cat.name}"
        else:
            m: Column = p["m"]
            fn = "sum" if op == "sum_by" else "max"
            code = (
                "groups = {}\n"
                "for f, _ in rows:\n"
                f"    groups.setdefault(f[{cat.name!r}], []).append(float(f[{m.name!r}]))\n"
                f"result = {{k: {fn}(v) for k, v in groups.items()}}\n"
            )
            what = "total" if fn == "sum" else "largest value"
            what += f" of {t.label(m)}"
            hv, numeric_int = ("total" if fn == "sum" else "max"), m.integral
            goal = _pick(rng, (
                f"For each {t.label(cat)} of {rows}, compute the {what}",
                f"Work out the {what} per {t.label(cat)} over {rows}",
            ))  # fmt: skip
            title = f"{'total' if fn == 'sum' else 'peak'} {m.name} per {cat.name}"
        hk = cat.name if t.form not in ("fields", "entries") else "key"
        k = f"{t.label(cat)} value"
        desc = _MAP_FORMATS[fmt].format(k=k, v=what, hk=hk, hv=hv)
        phrase = f"{goal}, and write it to `{out}` as {desc}."
        step = Step("aggregate", op, out, fmt, code, phrase, numeric=True, header=(hk, hv),
                    title=title)  # fmt: skip
        step.code += f"result = {{k: {_fmt_num(numeric_int)} for k, v in result.items()}}\n"
        return step
    if op == "stats":
        m = p["m"]
        out = path(op, "json")
        code = (
            f"vals = [float(f[{m.name!r}]) for f, _ in rows]\n"
            "result = {'count': len(vals), 'min': min(vals), 'max': max(vals), "
            "'sum': round(sum(vals), 2), 'mean': round(sum(vals) / len(vals), 2)}\n"
        )
        phrase = _pick(rng, (
            f"Summarise {t.label(m)} over {rows} in `{out}`: a JSON object with exactly the "
            "keys `count`, `min`, `max`, `sum` and `mean` (the mean and the sum rounded to 2 "
            "decimals).",
            f"Write statistics of {t.label(m)} over {rows} to `{out}` as a JSON object with "
            f"the keys `count` (how many {t.noun}), `min`, `max`, `sum` and `mean` (sum and mean "
            "to 2 decimals), and no other key.",
        ))  # fmt: skip
        return Step("aggregate", op, out, "json", code, phrase, numeric=True,
                    title=f"statistics of {m.name}")  # fmt: skip
    if op == "top_k":
        m, key, k = p["m"], p["key"], p["k"]
        code = (
            f"ranked = sorted(rows, key=lambda fr: -float(fr[0][{m.name!r}]))\n"
            f"result = [f[{key.name!r}] for f, _ in ranked[:{k}]]\n"
        )
        fmt = _pick(rng, ("lines", "jsonlist"))
        out = path(op, fmt)
        how = "one per line" if fmt == "lines" else "as a JSON array of strings"
        phrase = _pick(rng, (
            f"Rank {rows} by {t.label(m)}, largest first (ties keep their original order), "
            f"and write the {t.label(key)} of the top {k} to `{out}`, {how}.",
            f"Find the {k} {t.noun} among {rows} with the largest {t.label(m)} (ties: the "
            f"earlier first) and list their {t.label(key)} in `{out}`, {how}, largest first.",
        ))  # fmt: skip
        return Step("aggregate", op, out, fmt, code, phrase, title=f"top {k} by {m.name}")
    if op == "distinct":
        col = p["col"]
        code = f"result = sorted({{f[{col.name!r}] for f, _ in rows}})\n"
        fmt = _pick(rng, ("lines", "jsonlist"))
        out = path(op, fmt)
        how = "one per line" if fmt == "lines" else "as a JSON array"
        phrase = (
            f"List the distinct values of {t.label(col)} among {rows} in `{out}`, sorted in "
            f"plain string order, {how}."
        )
        return Step("aggregate", op, out, fmt, code, phrase, title=f"distinct {col.name} values")
    if op == "words":
        k = p["k"]
        code = (
            "import re\n"
            "from collections import Counter\n"
            f"words = Counter(w for f, _ in rows for w in re.findall({WORD.pattern!r}, "
            "f['line']))\n"
            f"result = dict(sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))[:{k}])\n"
        )
        fmt = _pick(rng, ("tsv", "colon", "json"))
        out = path(op, fmt)
        desc = _MAP_FORMATS[fmt].format(k="word", v="count", hk="word", hv="count")
        phrase = (
            f"Find the {k} most frequent words in {rows} (a word: a letter or `_` followed by "
            f"two or more letters, digits or `_`; ties go to the word that sorts first), and "
            f"write them with their counts to `{out}` as {desc}."
        )
        return Step("aggregate", op, out, fmt, code, phrase, numeric=True, header=("word", "count"),
                    title=f"the {k} most frequent words")  # fmt: skip
    if op == "distinct_words":
        out = path(op, "lines")
        code = (
            "import re\n"
            f"result = sorted({{w for f, _ in rows for w in re.findall({WORD.pattern!r}, "
            "f['line'])})\n"
        )
        phrase = (
            f"List the distinct words of {rows} in `{out}` (a word: a letter or `_` followed "
            "by two or more letters, digits or `_`), sorted in plain string order, one per line."
        )
        return Step("aggregate", op, out, "lines", code, phrase, title="the vocabulary")
    # sections
    code = (
        "from collections import Counter\n"
        "result = dict(Counter(f['key'].split('.')[0] for f, _ in rows))\n"
    )
    fmt = _pick(rng, list(_MAP_FORMATS))
    out = path(op, fmt)
    desc = _MAP_FORMATS[fmt].format(k="top-level section", v="number of entries", hk="section",
                                    hv="entries")  # fmt: skip
    phrase = (
        f"Count {rows} per top-level section (the key path up to its first `.`, or the whole "
        f"path when it has none) and write it to `{out}` as {desc}."
    )
    return Step("aggregate", op, out, fmt, code, phrase, numeric=True,
                header=("section", "entries"), title="entries per section")  # fmt: skip


def summary_step(prev: Step, rng: random.Random, out: str) -> Step | None:
    """A summary of a mapping or a list result (None when the previous step has none)."""
    if prev.fmt in ("json", "csv", "tsv", "colon") and prev.numeric and prev.op != "stats":
        if _pick(rng, (True, False)):
            code = "result = sorted(result.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]\n"
            phrase = (
                f"Finally, write to `{out}` the {prev.header[0]} of `{prev.out}` with the "
                f"largest {prev.header[1]} (ties: the one that sorts first), and a newline."
            )
            return Step("summary", "argmax", out, "scalar", code, phrase, title="the leader")
        code = "result = round(sum(result.values()), 2)\n"
        phrase = (
            f"Finally, write the sum of the {prev.header[1]} values listed in `{prev.out}` to "
            f"`{out}` (a number, and a newline)."
        )
        return Step("summary", "total", out, "scalar", code, phrase, numeric=True,
                    title="the grand total")  # fmt: skip
    if prev.fmt in ("lines", "jsonlist"):
        code = "result = len(result)\n"
        phrase = f"Finally, write how many items `{prev.out}` lists to `{out}`, and a newline."
        return Step("summary", "count", out, "scalar", code, phrase, numeric=True,
                    title="the count")  # fmt: skip
    return None


# ---- rendering: the reference solution and the tests ------------------------------------------

_WRITERS = {
    "json": (
        "import json\n"
        "with open(OUT, 'w') as f:\n"
        "    json.dump(dict(sorted(result.items())) if isinstance(result, dict) else result, f, "
        "indent=2)\n"
        "    f.write('\\n')\n"
    ),
    "jsonlist": (
        "import json\n"
        "with open(OUT, 'w') as f:\n"
        "    json.dump(result, f, indent=2)\n"
        "    f.write('\\n')\n"
    ),
    "csv": (
        "import csv\n"
        "with open(OUT, 'w', newline='') as f:\n"
        "    w = csv.writer(f, lineterminator='\\n')\n"
        "    w.writerow(HEADER)\n"
        "    w.writerows(sorted(result.items()))\n"
    ),
    "tsv": (
        "with open(OUT, 'w') as f:\n"
        "    f.writelines(f'{k}\\t{v}\\n' for k, v in sorted(result.items()))\n"
    ),
    "colon": (
        "with open(OUT, 'w') as f:\n"
        "    f.writelines(f'{k}: {v}\\n' for k, v in sorted(result.items()))\n"
    ),
    "lines": "with open(OUT, 'w') as f:\n    f.writelines(f'{v}\\n' for v in result)\n",
    "scalar": "with open(OUT, 'w') as f:\n    f.write(f'{result}\\n')\n",
}


def _rows_writer(t: Table) -> str:
    if t.form == "csv":
        return (
            "import csv\n"
            "with open(OUT, 'w', newline='') as f:\n"
            f"    w = csv.DictWriter(f, fieldnames={list(t.header)!r}, lineterminator='\\n')\n"
            "    w.writeheader()\n"
            "    w.writerows(r for _, r in result)\n"
        )
    if t.form == "json_records":
        return (
            "import json\n"
            "with open(OUT, 'w') as f:\n"
            "    json.dump([r for _, r in result], f, indent=2)\n"
            "    f.write('\\n')\n"
        )
    if t.form == "entries":
        return (
            "import json\n"
            "with open(OUT, 'w') as f:\n"
            "    json.dump({k: v for _, (k, v) in result}, f, indent=2)\n"
            "    f.write('\\n')\n"
        )
    return "with open(OUT, 'w') as f:\n    f.writelines(f'{r}\\n' for _, r in result)\n"


def _indent(code: str, n: int = 4) -> str:
    return "".join((" " * n + ln if ln.strip() else ln) for ln in code.splitlines(keepends=True))


def _compute_fn(tag: str, i: int, step: Step) -> str:
    """`_<tag>_step<i>(x)`: the step's result from its input (rows, or the previous result)."""
    arg = "rows" if step.kind != "summary" else "result"
    return f"def _{tag}_step{i}({arg}):\n{_indent(step.code)}    return result\n"


def solution_steps(plan: Plan, tag: str, wd: str) -> list[str]:
    """The reference solution's lines: one Python heredoc computing and writing every file."""
    t = plan.table
    lines = [_reader(t, f"_{tag}_")]
    for i, s in enumerate(plan.steps):
        lines.append(_compute_fn(tag, i, s))
    lines.append(f"rows = _{tag}_rows({t.path!r})")
    prev = "rows"
    for i, s in enumerate(plan.steps):
        var = f"r{i}"
        lines.append(f"{var} = _{tag}_step{i}({prev if s.kind != 'summary' else f'r{i - 1}'})")
        writer = _rows_writer(t) if s.fmt == "rows" else _WRITERS[s.fmt]
        writer = writer.replace("OUT", repr(s.out)).replace("HEADER", repr(list(s.header)))
        lines.append(f"result = {var}\nimport os\nos.makedirs({posixpath.dirname(s.out)!r}, "
                     f"exist_ok=True)\n{writer}")  # fmt: skip
        if s.kind == "select":
            prev = var
    body = "\n".join(lines)
    return ["python3 - <<'T1_PY'", *body.rstrip("\n").split("\n"), "T1_PY"]


_READBACK = {
    "json": "    import json\n\n    with open(OUT) as f:\n        got = json.load(f)\n",
    "jsonlist": "    import json\n\n    with open(OUT) as f:\n        got = json.load(f)\n",
    "csv": (
        "    import csv\n\n"
        "    with open(OUT, newline='') as f:\n"
        "        table = list(csv.reader(f))\n"
        "    assert table and table[0] == HEADER, f'header line {table[:1]!r}'\n"
        "    got = {r[0]: r[1] for r in table[1:] if r}\n"
    ),
    "tsv": (
        "    with open(OUT) as f:\n"
        "        got = dict(ln.split('\\t', 1) for ln in f.read().splitlines() if ln.strip())\n"
    ),
    "colon": (
        "    with open(OUT) as f:\n"
        "        got = dict(ln.split(': ', 1) for ln in f.read().splitlines() if ln.strip())\n"
    ),
    "lines": "    with open(OUT) as f:\n        got = f.read().splitlines()\n",
    "scalar": "    with open(OUT) as f:\n        got = f.read().rstrip('\\n')\n",
}


def _check(step: Step) -> str:
    """The assertion comparing `got` (as read back) with `want` (the recomputed result)."""
    if step.fmt == "rows":
        return "    assert got == want, f'{len(got)} records written, {len(want)} expected'\n"
    if step.fmt == "scalar":
        if step.numeric:
            return (
                "    assert abs(float(got) - float(want)) <= 0.01, f'{got!r}, expected {want!r}'\n"
            )
        return "    assert got == str(want), f'{got!r}, expected {want!r}'\n"
    if step.fmt in ("lines", "jsonlist"):
        return "    assert list(got) == list(want), f'{got!r}, expected {want!r}'\n"
    if step.numeric:
        return (
            "    assert sorted(got) == sorted(want), f'keys {sorted(got)!r}, expected "
            "{sorted(want)!r}'\n"
            "    for k, v in want.items():\n"
            "        assert abs(float(got[k]) - float(v)) <= 0.01, (k, got[k], v)\n"
        )
    return "    assert dict(got) == dict(want), f'{got!r}, expected {want!r}'\n"


def _rows_readback(t: Table) -> str:
    if t.form == "csv":
        return (
            "    import csv\n\n"
            "    with open(OUT, newline='') as f:\n"
            "        got = list(csv.reader(f))\n"
            f"    want = [{list(t.header)!r}] + [[r[h] for h in {list(t.header)!r}] "
            "for _, r in want]\n"
        )
    if t.form in ("json_records", "entries"):
        shape = (
            "[r for _, r in want]" if t.form == "json_records" else "{k: v for _, (k, v) in want}"
        )
        return (
            "    import json\n\n"
            "    with open(OUT) as f:\n"
            "        got = json.load(f)\n"
            f"    want = {shape}\n"
        )
    return (
        "    with open(OUT) as f:\n"
        "        got = f.read().splitlines()\n"
        "    want = [r for _, r in want]\n"
    )


def test_source(plan: Plan, tag: str) -> str:
    """The new tests: the reader and step functions, then one test per step, each
    recomputing its expectation from the parent's output."""
    t = plan.table
    parts = [_reader(t, f"_{tag}_")]
    for i, s in enumerate(plan.steps):
        parts.append(_compute_fn(tag, i, s))
    rows = f"_{tag}_rows({t.path!r})"
    if plan.steps and plan.steps[0].kind == "select":
        rows = f"_{tag}_step0({rows})"
    agg = next((i for i, s in enumerate(plan.steps) if s.kind == "aggregate"), None)
    for i, s in enumerate(plan.steps):
        if s.kind == "select":
            chain = rows
        elif s.kind == "aggregate":
            chain = f"_{tag}_step{i}({rows})"
        else:
            chain = f"_{tag}_step{i}(_{tag}_step{agg}({rows}))"
        name = f"test_{tag}_{s.op}_{posixpath.basename(s.out).split('.')[0]}"
        name = re.sub(r"[^0-9a-zA-Z_]", "_", name)
        body = f"    want = {chain}\n"
        if s.fmt == "rows":
            body += _rows_readback(t)
        else:
            body += _READBACK[s.fmt]
        body += _check(s)
        body = body.replace("OUT", repr(s.out)).replace("HEADER", repr(list(s.header)))
        parts.append(f"def {name}():\n{body}")
    return "\n\n".join(p.rstrip("\n") + "\n" for p in parts)


# ---- the operators ---------------------------------------------------------------------------


def tables(parent: Parent, op: Operator) -> list[tuple[OutputFile, Table]]:
    """The parent's guarded outputs readable as tables of the forms `op` works on."""
    out = []
    for f in op.targets(parent):
        t = read_table(f)
        if t is not None and t.form in op.forms:  # type: ignore[attr-defined]
            out.append((f, t))
    return out


class Derived(Operator):
    """A composed extension over one parent output read as a table (see the module doc)."""

    forms: tuple[str, ...] = ()
    aggregations: tuple[str, ...] = ()
    select_rate = 0.7
    summary_rate = 0.5
    max_outputs = 1

    def targets(self, parent: Parent) -> list[OutputFile]:
        return [f for f in super().targets(parent) if f.sample is not None and f.complete]

    def feasible(self, parent: Parent) -> str | None:
        problem = super().feasible(parent)
        if problem:
            return problem
        if not any(self._aggregations(t, random.Random(0), None) for _, t in tables(parent, self)):
            return f"no output readable as {'/'.join(self.forms)} with work to derive"
        return None

    def _aggregations(self, t: Table, rng: random.Random, sel: Step | None) -> list[dict]:
        return [p for p in _agg_options(t, rng, sel) if p["op"] in self.aggregations]

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        rng, tag, wd = ctx.rng, ctx.tag, parent.workdir
        fit = [(f, t) for f, t in tables(parent, self) if self._aggregations(t, rng, None)]
        latest = set(parent.stages[-1].produces) if parent.stages else set()
        recent = [(f, t) for f, t in fit if f.path in latest]
        if recent and rng.random() < 0.5:
            fit = recent
        f, t = _pick(rng, fit)
        plan = Plan(t)
        outdir = f"{wd}/{_pick(rng, OUT_DIRS)}"
        stem = re.sub(r"[^a-z0-9]+", "_", posixpath.splitext(f.rel)[0].lower()).strip("_")
        stem = "_".join(stem.split("_")[-3:])[-32:].strip("_")  # the name's last words
        src_name = f"`{t.path}`"
        plan.intro = introduce(t, rng)
        sel_out = f"{outdir}/{stem}_selected_{tag}{_ext(t)}"

        def path(op: str, fmt: str) -> str:
            return f"{outdir}/{stem}_{op}_{tag}{_SUFFIX.get(fmt, '.txt')}"

        def aggregate(sel: Step | None) -> Step:
            return agg_step(plan, _pick(rng, self._aggregations(t, rng, sel)), rng, path, src_name)

        # At least two typed steps: a selection, or a summary of the aggregation, or both.
        sel = select_step(plan, rng, sel_out, src_name) if rng.random() < self.select_rate else None
        if sel is not None and not self._aggregations(t, rng, sel):
            sel = None
        agg = aggregate(sel)
        summary_out = f"{outdir}/{stem}_{tag}_summary.txt"
        summ = summary_step(agg, rng, summary_out)
        if sel is not None and rng.random() >= self.summary_rate:
            summ = None
        if sel is None and summ is None:
            sel = select_step(plan, rng, sel_out, src_name)
            if sel is not None and self._aggregations(t, rng, sel):
                agg = aggregate(sel)
                if rng.random() < self.summary_rate:
                    summ = summary_step(agg, rng, summary_out)
            else:  # no selection fits: an aggregation a summary can follow
                sel = None
                options = self._aggregations(t, rng, None)
                rng.shuffle(options)
                for p in options:
                    agg = agg_step(plan, p, rng, path, src_name)
                    summ = summary_step(agg, rng, summary_out)
                    if summ is not None:
                        break
        plan.steps = [s for s in (sel, agg, summ) if s is not None]
        if len(plan.steps) < 2:
            raise RewriteError(f"{self.name}: {f.rel} supports one step only, not a composition")
        return self._render(parent, ctx, plan, f)

    def _render(self, parent: Parent, ctx: RewriteContext, plan: Plan, f: OutputFile) -> Extension:
        tag = ctx.tag
        text = " ".join([plan.intro, *(s.phrase for s in plan.steps)])
        titles = [s.title for s in plan.steps if s.title]
        title = titles[-1] if len(titles) == 1 else f"{titles[0]}, then {titles[-1]}"
        return Extension(
            title=title[:95],
            steps=solution_steps(plan, tag, parent.workdir),
            tests=test_source(plan, tag),
            text=text,
            requires=["python3"],
            consumes=[f.path],
            creates=[s.out for s in plan.steps],
        )


def _ext(t: Table) -> str:
    return {"csv": ".csv", "json_records": ".json", "entries": ".json"}.get(t.form, ".txt")


class RecordQuery(Derived):
    name = "record_query"
    family = "record_query"
    forms = ("csv", "json_records", "fields")
    aggregations = ("count_by", "sum_by", "max_by", "stats", "distinct")


class RecordRanking(Derived):
    name = "record_ranking"
    family = "record_ranking"
    forms = ("csv", "json_records", "fields")
    aggregations = ("top_k",)
    summary_rate = 0.6


class EntryQuery(Derived):
    name = "entry_query"
    family = "entry_query"
    forms = ("entries",)
    aggregations = ("sections", "distinct", "count_by")
    select_rate = 0.8


class TextQuery(Derived):
    name = "text_query"
    family = "text_query"
    forms = ("lines", "fields")
    aggregations = ("words", "distinct_words", "count_by", "distinct")
    select_rate = 0.8


OPERATORS: list[Operator] = [RecordQuery(), RecordRanking(), EntryQuery(), TextQuery()]
