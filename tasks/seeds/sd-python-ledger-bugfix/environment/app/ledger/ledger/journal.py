import datetime
from dataclasses import dataclass
from decimal import Decimal

from ledger.money import parse_amount


@dataclass
class Txn:
    date: datetime.date
    account: str
    amount: Decimal
    memo: str


def load_csv(path):
    """Read a journal CSV (header: date,account,amount,memo) into a list of Txn."""
    txns = []
    with open(path) as f:
        next(f)
        for line in f:
            date, account, amount, memo = line.rstrip("\n").split(",")
            txns.append(Txn(datetime.date.fromisoformat(date), account, parse_amount(amount), memo))
    return txns
