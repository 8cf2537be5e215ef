"""Temperature conversions through Kelvin."""

OFFSET = 273.15


def to_kelvin(value, unit):
    if unit == "K":
        return value
    if unit == "C":
        return value + OFFSET
    if unit == "F":
        return (value - 32) * 5 / 9 + OFFSET
    raise ValueError(f"unknown unit {unit!r}")


def from_kelvin(value, unit):
    if unit == "K":
        return value
    if unit == "C":
        return value - OFFSET
    if unit == "F":
        return (value - OFFSET) * 9 / 5 + 32
    raise ValueError(f"unknown unit {unit!r}")
