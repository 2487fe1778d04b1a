from ledger.accounts import Account
from ledger.money import fmt_amt as _fmt


def transfer(src: Account, dst: Account, cents: int) -> str:
    if cents <= 0:
        raise ValueError("transfer a positive amount")
    if src.currency != dst.currency:
        raise ValueError("currencies differ")
    src.post(-cents, f"to {dst.name}")
    dst.post(cents, f"from {src.name}")
    return f"moved {_fmt(cents, src.currency)} from {src.name} to {dst.name}"
