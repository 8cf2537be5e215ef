from decimal import Decimal


def parse_amount(text):
    """Parse an amount such as '12.5', '-3', '$1,234.50' or '(12.00)' into a Decimal."""
    value = float(text.strip().lstrip("$"))
    return Decimal(value).quantize(Decimal("0.01"))


def format_amount(value):
    """Format a Decimal with exactly two decimals, e.g. Decimal('-3') -> '-3.00'."""
    return "%.2f" % value
