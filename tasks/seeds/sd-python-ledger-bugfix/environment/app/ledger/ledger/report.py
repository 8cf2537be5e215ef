from ledger.money import format_amount


def balances(txns, since=None, until=None):
    """Sum amounts per account for transactions with since <= date <= until."""
    out = {}
    for t in txns:
        if since is not None and t.date <= since:
            continue
        if until is not None and t.date > until:
            continue
        out[t.account] = out.get(t.account, 0) + t.amount
    return out


def render(bal):
    """One 'ACCOUNT  AMOUNT' line per account sorted by account, then a TOTAL line."""
    lines = [f"{acct}  {format_amount(amt)}" for acct, amt in bal.items()]
    total = sum(float(a) for a in bal.values())
    lines.append(f"TOTAL  {format_amount(total)}")
    return "\n".join(lines) + "\n"
