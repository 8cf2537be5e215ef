#!/usr/bin/env python3
"""tempconv VALUE FROM [TO] - convert a temperature between C, F and K.

TO defaults to the configured `default_to`; output precision comes from `precision`."""
import json
import sys

import fmt
import units


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    with open("defaults.json") as f:
        config = json.load(f)
    value, src = float(argv[0]), argv[1].upper()
    dst = argv[2].upper() if len(argv) == 3 else config["default_to"]
    result = units.from_kelvin(units.to_kelvin(value, src), dst)
    print(fmt.format_temp(result, dst, config["precision"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
