import argparse
import datetime
import sys

from ledger.journal import load_csv
from ledger.report import balances, render


def main(argv=None):
    p = argparse.ArgumentParser(prog="ledger")
    sub = p.add_subparsers(dest="cmd", required=True)
    rep = sub.add_parser("report", help="print account balances")
    rep.add_argument("journal")
    rep.add_argument("--since", type=datetime.date.fromisoformat)
    rep.add_argument("--until", type=datetime.date.fromisoformat)
    args = p.parse_args(argv)
    txns = load_csv(args.journal)
    sys.stdout.write(render(balances(txns, args.since, args.until)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
