#!/bin/bash
# Rewrite the CSV reader so filter predicates are evaluated while iterating the file
# (only the filtered columns are converted before the row is accepted; rejected rows are
# never materialized), add read_with_filters()/rows_processed as test_queries.py expects,
# then measure the actual reduction of materialized rows for selective queries.
set -e
cd /workspace

cat > /workspace/reader.py <<'EOF'
#!/usr/bin/env python3
"""
Custom CSV data reader with filter (predicate) pushdown.

Why the original reader could not push filters down: it materialized every row
(csv.DictReader + type conversion + append to a list) and only afterwards looped
over the in-memory list to apply the WHERE conditions, and its filter format only
understood plain equality.

This version compiles filter predicates up front and evaluates them during row
iteration, on the raw fields of only the filtered columns.  A row is converted into
a dict (and kept in memory) only when it satisfies every pushable predicate.
Predicates that cannot be pushed down (arbitrary callables over the whole row) are
still honoured, they are simply evaluated after the row has been built.

Filter format (dict of column -> condition, conditions are ANDed):
    {'id': 5000}                              plain value -> equals (backwards compatible)
    {'id': ('equals', 5000)}
    {'id': ('not_equals', 5000)}
    {'temperature': ('greater_than', 75.0)}
    {'temperature': ('greater_equal', 75.0)}
    {'temperature': ('less_than', 50.0)}
    {'temperature': ('less_equal', 50.0)}
    {'timestamp': ('range', 1000, 2000)}      exclusive: 1000 < x < 2000
    {'timestamp': ('between', 1000, 2000)}    inclusive: 1000 <= x <= 2000
    {'status': ('in', ['active', 'idle'])}
    {'id': ('or', ('less_than', 10), ('greater_than', 9000))}
    {'id': ('and', ('greater_than', 10), ('less_than', 90))}
    {'id': lambda v: v % 2 == 0}              callable on a single column value
A callable may also be passed as the whole filter (or under the key '__row__');
it receives the full row dict and cannot be pushed down.
"""
import csv
import operator
from typing import Any, Callable, Dict, List, Optional

COLUMN_TYPES = {
    'id': int,
    'timestamp': int,
    'temperature': float,
    'pressure': float,
}

SUPPORTED_FILTERS = ['equals', 'not_equals', 'greater_than', 'greater_equal',
                     'less_than', 'less_equal', 'range', 'between', 'in', 'and', 'or']

_BINARY_OPS = {
    'equals': operator.eq, 'eq': operator.eq, '=': operator.eq, '==': operator.eq,
    'not_equals': operator.ne, 'ne': operator.ne, '!=': operator.ne,
    'greater_than': operator.gt, 'gt': operator.gt, '>': operator.gt,
    'greater_equal': operator.ge, 'ge': operator.ge, '>=': operator.ge,
    'less_than': operator.lt, 'lt': operator.lt, '<': operator.lt,
    'less_equal': operator.le, 'le': operator.le, '<=': operator.le,
}


def _convert(column: str, raw: str) -> Any:
    conv = COLUMN_TYPES.get(column)
    if conv is None:
        return raw
    try:
        return conv(raw)
    except (TypeError, ValueError):
        return raw


def compile_condition(cond: Any) -> Callable[[Any], bool]:
    """Compile one column condition into a predicate over the (typed) column value."""
    if callable(cond):
        return cond
    if isinstance(cond, tuple) and cond and isinstance(cond[0], str):
        op = cond[0].lower()
        if op in _BINARY_OPS:
            fn, target = _BINARY_OPS[op], cond[1]
            return lambda v: v is not None and fn(v, target)
        if op == 'range':
            lo, hi = cond[1], cond[2]
            return lambda v: v is not None and lo < v < hi
        if op == 'between':
            lo, hi = cond[1], cond[2]
            return lambda v: v is not None and lo <= v <= hi
        if op == 'in':
            values = set(cond[1])
            return lambda v: v in values
        if op in ('and', 'or'):
            parts = [compile_condition(c) for c in cond[1:]]
            if op == 'and':
                return lambda v: all(p(v) for p in parts)
            return lambda v: any(p(v) for p in parts)
        raise ValueError(f"Unsupported filter operator: {cond[0]!r}")
    # plain value -> equality (original behaviour)
    return lambda v: v == cond


class CSVReader:
    """
    Custom CSV data reader supporting filter / predicate pushdown.

    Filters (WHERE conditions) are applied while the file is being read, so only
    rows that match are converted and stored in memory.

    Attributes after a query:
        rows_scanned    - number of CSV records seen in the file
        rows_processed  - number of rows materialized (converted and loaded) by the reader
        rows_returned   - number of rows in the result

    Example usage:
        reader = CSVReader('/path/to/data.csv')
        results = reader.read_with_filters({'id': ('equals', 5000)})
        results = reader.query(filters={'id': 5000})
    """

    def __init__(self, file_path: str):
        self.file_path = file_path
        self.rows_scanned = 0
        self.rows_processed = 0
        self.rows_returned = 0

    # ------------------------------------------------------------------ internals
    def _split_filters(self, filters, header):
        """Split filters into pushable per-column predicates and residual row predicates."""
        pushed = []    # (column index, column name, predicate)
        residual = []  # predicates over a full row dict
        if filters is None:
            return pushed, residual
        if callable(filters):
            return pushed, [filters]
        if isinstance(filters, (list, tuple)):
            # list of row-level predicates / filter dicts, all ANDed
            for f in filters:
                p, r = self._split_filters(f, header)
                pushed.extend(p)
                residual.extend(r)
            return pushed, residual
        for column, cond in filters.items():
            if column == '__row__':
                residual.append(cond)
                continue
            pred = compile_condition(cond)
            if column in header:
                pushed.append((header.index(column), column, pred))
            else:
                # unknown column: nothing can match (original semantics)
                pushed.append((None, column, lambda v: False))
        return pushed, residual

    def _iter_rows(self, filters=None):
        """Generator yielding matching rows; predicates evaluated during iteration."""
        self.rows_scanned = 0
        self.rows_processed = 0
        self.rows_returned = 0
        with open(self.file_path, 'r', newline='') as csvfile:
            reader = csv.reader(csvfile)
            header = next(reader, None)
            if header is None:
                return
            header = [h.strip() for h in header]
            pushed, residual = self._split_filters(filters, header)
            ncols = len(header)
            for fields in reader:
                if not fields:
                    continue
                self.rows_scanned += 1
                ok = True
                for idx, column, pred in pushed:
                    if idx is None or idx >= len(fields):
                        ok = False
                        break
                    if not pred(_convert(column, fields[idx])):
                        ok = False
                        break
                if not ok:
                    continue  # row skipped without being materialized
                self.rows_processed += 1
                row = {header[i]: _convert(header[i], fields[i]) if i < len(fields) else None
                       for i in range(ncols)}
                if residual and not all(r(row) for r in residual):
                    continue
                self.rows_returned += 1
                yield row

    # ------------------------------------------------------------------ public API
    def iter_with_filters(self, filters=None):
        """Stream rows matching the filter predicates (pushdown, constant memory)."""
        return self._iter_rows(filters)

    def read_with_filters(self, filters: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
        """Return rows matching the filter predicates, applied during the CSV read."""
        try:
            return list(self._iter_rows(filters))
        except FileNotFoundError:
            print(f"Error: File {self.file_path} not found")
            return []

    def query(self, filters: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
        """Query the CSV file with optional filter (WHERE condition) pushdown."""
        return self.read_with_filters(filters)

    # Alias for backwards compatibility
    def read(self, filters: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
        """Alias for query method (filters are pushed down)"""
        return self.query(filters)
EOF

# test_queries.py does `from reader import CSVReader`, which only works when /workspace is
# the current directory or on sys.path; make it import the reader from its own directory
# so the query script also works when loaded from elsewhere (e.g. via importlib).
python3 - <<'EOF'
p = '/workspace/test_queries.py'
s = open(p).read()
old = "from reader import CSVReader\n"
new = ("sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n"
       "from reader import CSVReader  # noqa: E402\n")
if new not in s:
    assert old in s
    s = s.replace(old, new, 1)
    open(p, 'w').write(s)
EOF

# sanity: pushdown results must equal naive post-filtering
python3 - <<'EOF'
import csv, sys
sys.path.insert(0, '/workspace')
from reader import CSVReader, COLUMN_TYPES
path = '/workspace/data/sensors.csv'
rows = []
with open(path) as f:
    for r in csv.DictReader(f):
        rows.append({k: (COLUMN_TYPES[k](v) if k in COLUMN_TYPES else v) for k, v in r.items()})
r = CSVReader(path)
checks = [
    ({'id': ('equals', 5000)}, lambda x: x['id'] == 5000),
    ({'timestamp': ('range', 1000, 2000)}, lambda x: 1000 < x['timestamp'] < 2000),
    ({'temperature': ('greater_than', 75.0)}, lambda x: x['temperature'] > 75.0),
    ({'id': ('greater_than', 1000), 'temperature': ('less_than', 50.0)},
     lambda x: x['id'] > 1000 and x['temperature'] < 50.0),
    ({'id': 5000}, lambda x: x['id'] == 5000),
    (None, lambda x: True),
]
for flt, ref in checks:
    got = r.read_with_filters(flt)
    exp = [x for x in rows if ref(x)]
    assert got == exp, (flt, len(got), len(exp))
print("pushdown results match naive filtering")
EOF

python3 /workspace/test_queries.py

# measure the fraction of rows NOT materialized for selective queries
REDUCTION=$(python3 - <<'EOF'
import sys
sys.path.insert(0, '/workspace')
from reader import CSVReader
r = CSVReader('/workspace/data/sensors.csv')
selective = [
    {'id': ('equals', 5000)},
    {'id': ('equals', 1)},
    {'id': ('greater_than', 1000), 'temperature': ('less_than', 50.0)},
]
fr = []
for f in selective:
    r.read_with_filters(f)
    fr.append(1 - r.rows_processed / r.rows_scanned)
print(round(100 * sum(fr) / len(fr)))
EOF
)
echo "measured data reduction: $REDUCTION%"

FILTERS=$(python3 -c "import sys; sys.path.insert(0,'/workspace'); import reader; print(','.join(reader.SUPPORTED_FILTERS))")

cat > /workspace/solution.txt <<EOF
modified_file: /workspace/reader.py
filters_supported: $FILTERS
data_reduction: $REDUCTION
EOF
cat /workspace/solution.txt
