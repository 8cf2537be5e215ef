import unittest
from decimal import Decimal

from ledger.money import format_amount, parse_amount


class ParseAmountTest(unittest.TestCase):
    def test_plain(self):
        self.assertEqual(parse_amount("12.5"), Decimal("12.50"))
        self.assertEqual(parse_amount(" -3 "), Decimal("-3.00"))

    def test_currency_and_thousands(self):
        self.assertEqual(parse_amount("$1,234.50"), Decimal("1234.50"))
        self.assertEqual(parse_amount("1,000,000"), Decimal("1000000.00"))

    def test_parentheses_mean_negative(self):
        self.assertEqual(parse_amount("(12.00)"), Decimal("-12.00"))
        self.assertEqual(parse_amount("($2,500.10)"), Decimal("-2500.10"))

    def test_exact_decimal_rounding_half_up(self):
        self.assertEqual(parse_amount("0.125"), Decimal("0.13"))
        self.assertEqual(parse_amount("2.675"), Decimal("2.68"))

    def test_format(self):
        self.assertEqual(format_amount(Decimal("-3")), "-3.00")
        self.assertEqual(format_amount(Decimal("0.1") + Decimal("0.2")), "0.30")


if __name__ == "__main__":
    unittest.main()
