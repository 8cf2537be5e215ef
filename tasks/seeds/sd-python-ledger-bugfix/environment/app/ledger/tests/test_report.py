import datetime
import unittest
from decimal import Decimal

from ledger.journal import Txn
from ledger.report import balances, render

D = datetime.date


def txn(day, account, amount):
    return Txn(D(2024, 3, day), account, Decimal(amount), "")


class ReportTest(unittest.TestCase):
    def test_date_bounds_inclusive(self):
        txns = [txn(1, "a", "1.00"), txn(2, "a", "2.00"), txn(3, "a", "4.00")]
        self.assertEqual(balances(txns, since=D(2024, 3, 2)), {"a": Decimal("6.00")})
        self.assertEqual(balances(txns, until=D(2024, 3, 2)), {"a": Decimal("3.00")})
        self.assertEqual(balances(txns, D(2024, 3, 2), D(2024, 3, 2)), {"a": Decimal("2.00")})

    def test_render_sorted_with_exact_total(self):
        bal = {"zeta": Decimal("0.10"), "alpha": Decimal("0.20"), "Mid": Decimal("-0.30")}
        self.assertEqual(render(bal), "Mid  -0.30\nalpha  0.20\nzeta  0.10\nTOTAL  0.00\n")

    def test_render_large_total_exact(self):
        bal = {"a": Decimal("10000000000000000.01"), "b": Decimal("0.01")}
        self.assertEqual(render(bal).splitlines()[-1], "TOTAL  10000000000000000.02")


if __name__ == "__main__":
    unittest.main()
