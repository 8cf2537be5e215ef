import datetime
import os
import tempfile
import unittest
from decimal import Decimal

from ledger.journal import load_csv


class LoadCsvTest(unittest.TestCase):
    def write(self, text):
        fd, path = tempfile.mkstemp(suffix=".csv")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        self.addCleanup(os.remove, path)
        return path

    def test_quoted_memo_with_commas(self):
        path = self.write('date,account,amount,memo\n2024-01-02,food,"1,200.00","lunch, team"\n')
        (t,) = load_csv(path)
        self.assertEqual(t.date, datetime.date(2024, 1, 2))
        self.assertEqual(t.amount, Decimal("1200.00"))
        self.assertEqual(t.memo, "lunch, team")

    def test_blank_lines_skipped(self):
        path = self.write("date,account,amount,memo\n\n2024-01-03,rent,-900,\n\n")
        txns = load_csv(path)
        self.assertEqual(len(txns), 1)
        self.assertEqual(txns[0].account, "rent")


if __name__ == "__main__":
    unittest.main()
