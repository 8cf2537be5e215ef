"""A parent's output read as a typed table, from what its reference solution actually wrote.

`read_table` turns an output's profile sample (`OutputFile.sample`, complete outputs only)
into a `Table` of rows of named fields, in one of five forms:

- `csv`: a CSV file with a header line (fields named by the header);
- `json_records`: a JSON array of objects with scalar values (fields named by the keys);
- `fields`: text whose records (non-empty lines not starting with `#`) all split into the
  same number (>= 2) of fields by one separator (a tab, `,`, `;`, `|`, or runs of blanks);
  fields are named by their 1-based position;
- `entries`: a JSON document flattened to (key path, leaf) pairs (`db.port`, `hosts.0`), or
  an INI-style file of `key = value` lines under `[section]` headers (`server.port`);
- `lines`: any other text with at least three non-empty lines, each a record (`line`).

Each column is typed from every value of the output: `measure` (every value a number),
`category` (values repeat: at least two distinct, fewer distinct than rows), `key` (every
value distinct), `text` (the rest). The reader code (`reader_source`) is what the reference
solution and the tests run to read the same file the same way; the instruction states the
form in words (`synthesis.operators.derived.introduce`). Pure: nothing here runs anything.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field

from synthesis.profile import OutputFile

MIN_ROWS = 3
MAX_ROWS = 2000
SEPARATORS = (("\t", "tab"), (",", "comma"), (";", "semicolon"), ("|", "`|`"), (None, "blank"))
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_INI_LINE = re.compile(r"^\s*([^=\s#;\[][^=]*?)\s*=\s*(.*?)\s*$")
_SECTION = re.compile(r"^\s*\[([^\]]+)\]\s*$")


def number(text: str) -> float | None:
    """`text` as a finite number, or None (booleans, empty, `nan`, `1e999` are not)."""
    t = text.strip()
    if not re.fullmatch(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?", t):
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return v if v == v and abs(v) != float("inf") else None


@dataclass(frozen=True)
class Column:
    """One field of a table: its name (a header, a key, a position), its type, its values."""

    name: str
    kind: str  # measure | category | key | text
    values: tuple[str, ...]

    @property
    def distinct(self) -> list[str]:
        return sorted(set(self.values))

    @property
    def integral(self) -> bool:
        return self.kind == "measure" and all(
            (n := number(v)) is not None and n.is_integer() for v in self.values
        )


@dataclass(frozen=True)
class Table:
    """A parent output as rows of named fields (see the module docstring)."""

    path: str
    form: str  # csv | json_records | fields | entries | lines
    rows: tuple[dict[str, str], ...]
    columns: tuple[Column, ...]
    sep: str | None = None  # fields: the separator (None: runs of blanks)
    sep_name: str = ""
    source: str = "json"  # entries: json | ini
    header: tuple[str, ...] = field(default=())

    def of(self, *kinds: str) -> list[Column]:
        return [c for c in self.columns if c.kind in kinds]

    @property
    def noun(self) -> str:
        """What one row is called in the instruction."""
        return {"entries": "entries", "lines": "lines"}.get(self.form, "records")

    def label(self, col: Column) -> str:
        """How the instruction names a column."""
        if self.form == "fields":
            return f"field {col.name}"
        if self.form == "entries":
            return "key path" if col.name == "key" else "value"
        return f"`{col.name}`"


def _typed(names: list[str], rows: list[dict[str, str]]) -> tuple[Column, ...]:
    out = []
    for name in names:
        values = tuple(r.get(name, "") for r in rows)
        distinct = len(set(values))
        if all(number(v) is not None for v in values):
            ints = all(float(v).is_integer() for v in values)
            kind = "measure" if distinct >= 2 else "text"
            if ints and distinct == len(values) and re.search(r"(^|_)id$", name.lower()):
                kind = "key"  # an identifier, not a quantity
        elif distinct == len(values):
            kind = "key"
        elif 2 <= distinct < len(values) and all(v.strip() for v in values):
            kind = "category"
        else:
            kind = "text"
        out.append(Column(name, kind, values))
    return tuple(out)


def _leaf(v: object) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def flatten(doc: object, prefix: str = "") -> list[tuple[str, object]]:
    """A JSON document's leaves as (key path, value): object keys and list indices joined
    with `.`; empty objects and lists have none."""
    if isinstance(doc, dict):
        items: list[tuple[str, object]] = [(str(k), v) for k, v in doc.items()]
    elif isinstance(doc, list):
        items = [(str(i), v) for i, v in enumerate(doc)]
    else:
        return [(prefix, doc)]
    out = []
    for k, v in items:
        out += flatten(v, f"{prefix}.{k}" if prefix else k)
    return out


def ini_entries(text: str) -> list[tuple[str, str]] | None:
    """`key = value` lines under `[section]` headers as (section.key, value); None when a
    line is neither (a comment, blank), nor a section, nor a `key = value` pair."""
    section, out = "", []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(("#", ";")):
            continue
        if m := _SECTION.match(line):
            section = m.group(1).strip()
            continue
        m = _INI_LINE.match(line)
        if m is None:
            return None
        out.append((f"{section}.{m.group(1)}" if section else m.group(1), m.group(2)))
    return out


def _records(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def read_table(out: OutputFile) -> Table | None:
    """The output as a `Table`, or None (binary, no complete sample, too few rows)."""
    text = out.sample
    if text is None or not out.complete or out.kind == "binary":
        return None
    if out.kind == "csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        names = list(rows[0]) if rows else []
        if len(names) >= 2 and None not in names and all(None not in r.values() for r in rows):
            return _table(out.path, "csv", rows, names, header=tuple(names))
        return None
    if out.kind == "json":
        try:
            doc = json.loads(text)
        except ValueError:
            return None
        if isinstance(doc, list) and doc and all(isinstance(o, dict) for o in doc):
            names = list(doc[0])
            scalar = all(
                list(o) == names and not any(isinstance(v, dict | list) for v in o.values())
                for o in doc
            )
            if scalar and len(names) >= 2:
                rows = [{k: _leaf(v) for k, v in o.items()} for o in doc]
                return _table(out.path, "json_records", rows, names)
        pairs = flatten(doc)
        rows = [{"key": k, "value": _leaf(v)} for k, v in pairs]
        return _table(out.path, "entries", rows, ["key", "value"], source="json")
    pairs_ini = ini_entries(text)
    if pairs_ini is not None and len(pairs_ini) >= MIN_ROWS:
        rows = [{"key": k, "value": v} for k, v in pairs_ini]
        return _table(out.path, "entries", rows, ["key", "value"], source="ini")
    records = _records(text)
    for sep, sep_name in SEPARATORS:
        parts = [ln.split(sep) if sep else ln.split() for ln in records]
        n = len(parts[0]) if parts else 0
        if n >= 2 and all(len(p) == n for p in parts) and len(parts) >= MIN_ROWS:
            rows = [{str(i + 1): v for i, v in enumerate(p)} for p in parts]
            return _table(out.path, "fields", rows, [str(i + 1) for i in range(n)], sep=sep,
                          sep_name=sep_name)  # fmt: skip
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return _table(out.path, "lines", [{"line": ln} for ln in lines], ["line"])


def _table(path: str, form: str, rows: list[dict[str, str]], names: list[str],
           **kw: object) -> Table | None:  # fmt: skip
    if not MIN_ROWS <= len(rows) <= MAX_ROWS:
        return None
    return Table(path, form, tuple(rows), _typed(names, rows), **kw)  # type: ignore[arg-type]


def reader_source(t: Table, prefix: str) -> str:
    """Python defining `{prefix}rows(path)` -> [(fields, raw)]: the table's rows as dicts of
    strings, each with what the file holds for it (the CSV row, the JSON object, the line,
    the (key path, leaf) pair), read the way the instruction describes."""
    head = f"def {prefix}rows(path):\n"
    if t.form == "csv":
        body = (
            "    import csv\n\n"
            "    with open(path, newline='') as f:\n"
            "        return [(dict(r), dict(r)) for r in csv.DictReader(f)]\n"
        )
    elif t.form == "json_records":
        body = (
            "    import json\n\n"
            "    with open(path) as f:\n"
            "        doc = json.load(f)\n"
            "    return [({k: v if isinstance(v, str) else json.dumps(v) for k, v in o.items()},"
            " o) for o in doc]\n"
        )
    elif t.form == "fields":
        split = f"line.split({t.sep!r})" if t.sep else "line.split()"
        body = (
            "    out = []\n"
            "    with open(path) as f:\n"
            "        for line in f.read().splitlines():\n"
            "            if line.strip() and not line.lstrip().startswith('#'):\n"
            f"                parts = {split}\n"
            "                out.append(({str(i + 1): p for i, p in enumerate(parts)}, line))\n"
            "    return out\n"
        )
    elif t.form == "entries" and t.source == "json":
        body = (
            "    import json\n\n"
            "    def walk(v, p):\n"
            "        if isinstance(v, (dict, list)):\n"
            "            items = v.items() if isinstance(v, dict) else enumerate(v)\n"
            "            for k, x in items:\n"
            "                yield from walk(x, f'{p}.{k}' if p else str(k))\n"
            "        else:\n"
            "            yield p, v\n\n"
            "    with open(path) as f:\n"
            "        doc = json.load(f)\n"
            "    return [({'key': k, 'value': v if isinstance(v, str) else json.dumps(v)}, (k, v))"
            " for k, v in walk(doc, '')]\n"
        )
    elif t.form == "entries":
        body = (
            "    import re\n\n"
            "    out, section = [], ''\n"
            "    with open(path) as f:\n"
            "        for line in f.read().splitlines():\n"
            "            s = line.strip()\n"
            "            if not s or s[0] in '#;':\n"
            "                continue\n"
            "            m = re.match(r'^\\s*\\[([^\\]]+)\\]\\s*$', line)\n"
            "            if m:\n"
            "                section = m.group(1).strip()\n"
            "                continue\n"
            "            k, _, v = s.partition('=')\n"
            "            k, v = k.strip(), v.strip()\n"
            "            k = f'{section}.{k}' if section else k\n"
            "            out.append(({'key': k, 'value': v}, (k, v)))\n"
            "    return out\n"
        )
    else:
        body = (
            "    with open(path) as f:\n"
            "        return [({'line': ln}, ln) for ln in f.read().splitlines() if ln.strip()]\n"
        )
    return head + body
