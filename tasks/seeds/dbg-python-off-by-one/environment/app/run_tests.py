"""Regression tests for tsutil.series. Exit status 0 means all tests pass."""
import sys

from tsutil.series import chunk, date_range, last_n_days, moving_average, percentile

failures = 0


def check(name, got, want):
    global failures
    if got != want:
        failures += 1
        print(f"FAIL {name}: got {got!r}, want {want!r}")
    else:
        print(f"ok   {name}")


check("chunk exact", chunk([1, 2, 3, 4], 2), [[1, 2], [3, 4]])
check("chunk remainder", chunk([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]])
check("chunk short", chunk([1], 3), [[1]])
check("moving average", moving_average([1, 2, 3, 4], 2), [1.5, 2.5, 3.5])
check("moving average full window", moving_average([2, 4, 6], 3), [4.0])
check("percentile 40", percentile([15, 20, 35, 40, 50], 40), 20)
check("percentile 100", percentile([3, 1, 2], 100), 3)
check("date range", date_range("2024-02-27", "2024-03-01"),
      ["2024-02-27", "2024-02-28", "2024-02-29", "2024-03-01"])
rows = [{"date": f"2024-01-{d:02d}"} for d in range(1, 11)]
check("last 3 days", [r["date"] for r in last_n_days(rows, "2024-01-10", 3)],
      ["2024-01-08", "2024-01-09", "2024-01-10"])
sys.exit(1 if failures else 0)
