"""Small helpers for time-series reports."""

import datetime


def chunk(seq, size):
    """Split `seq` into consecutive lists of `size` items; the last one may be shorter.

    chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]
    """
    return [list(seq[i:i + size]) for i in range(0, len(seq) - size + 1, size)]


def moving_average(xs, k):
    """Averages of every window of `k` consecutive values: len(xs) - k + 1 results
    (an empty list when len(xs) < k).

    moving_average([1, 2, 3, 4], 2) == [1.5, 2.5, 3.5]
    """
    return [sum(xs[i:i + k]) / k for i in range(len(xs) - k)]


def percentile(xs, p):
    """Nearest-rank percentile: the smallest value such that at least p% of the values are
    less than or equal to it; for 0 < p <= 100 that is sorted(xs)[ceil(p / 100 * n) - 1].

    percentile([15, 20, 35, 40, 50], 40) == 20
    """
    import math

    s = sorted(xs)
    return s[math.ceil(p / 100 * len(s))]


def date_range(start, end):
    """All dates from `start` to `end`, both inclusive, as ISO strings (YYYY-MM-DD)."""
    d0 = datetime.date.fromisoformat(start)
    d1 = datetime.date.fromisoformat(end)
    return [(d0 + datetime.timedelta(days=i)).isoformat() for i in range((d1 - d0).days)]


def last_n_days(rows, end, n):
    """Rows (dicts with an ISO 'date' key) whose date lies in the n days ending at `end`
    inclusive, i.e. end - (n - 1) days <= date <= end."""
    d1 = datetime.date.fromisoformat(end)
    d0 = d1 - datetime.timedelta(days=n)
    return [r for r in rows if d0 <= datetime.date.fromisoformat(r["date"]) <= d1]
