from ledger import money
from ledger.accounts import Account


def statement(account: Account) -> str:
    lines = [f"Statement for {account.name}"]
    running = 0
    for cents, memo in account.entries:
        running += cents
        lines.append(f"  {memo or '-':<20} {money.fmt_amt(cents, account.currency):>16} "
                     f"{money.fmt_amt(running, account.currency):>16}")
    lines.append(f"  {'balance':<20} {'':>16} {money.fmt_amt(account.balance(), account.currency):>16}")
    return "\n".join(lines)
