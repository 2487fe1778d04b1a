#!/bin/bash
set -euo pipefail
cd /app
sed -i 's/\bfmt_amt\b/format_amount/g' ledger/money.py ledger/accounts.py ledger/report.py ledger/transfer.py
sed -i 's/^from ledger.money import format_amount as _fmt$/from ledger.money import format_amount/; s/\b_fmt(/format_amount(/g' ledger/transfer.py
cat >> ledger/money.py <<'PY'


def fmt_amt(cents: int, currency: str = "EUR") -> str:
    """Deprecated alias of format_amount."""
    import warnings

    warnings.warn("fmt_amt is deprecated; use format_amount", DeprecationWarning, stacklevel=2)
    return format_amount(cents, currency)
PY
grep -rn "fmt_amt\|format_amount" ledger
