#!/bin/bash
# Builds the repository's history (git history cannot ship as plain files). Identity and dates
# are fixed, so the commit ids are the same on every run.
set -euo pipefail
export GIT_AUTHOR_NAME="Sam Ops" GIT_AUTHOR_EMAIL=sam@example.com
export GIT_COMMITTER_NAME="Sam Ops" GIT_COMMITTER_EMAIL=sam@example.com
commit() {
    export GIT_AUTHOR_DATE="$1" GIT_COMMITTER_DATE="$1"
    shift
    git add -A
    git commit -q -m "$*"
}
git init -q -b main
git config user.name "Sam Ops"
git config user.email sam@example.com
git config commit.gpgsign false

cat > pricing.py <<'PY'
"""Order pricing."""


def line_total(unit_price, quantity):
    return unit_price * quantity


def order_total(lines, tax_rate=0.0):
    """lines: (unit_price, quantity) pairs."""
    subtotal = sum(line_total(p, q) for p, q in lines)
    return round(subtotal * (1 + tax_rate), 2)
PY
commit "2024-02-01T09:00:00+00:00" "Add price calculator"

cat >> pricing.py <<'PY'


DISCOUNTS = {"WELCOME10": 0.10}


def apply_discount(total, code=None):
    rate = DISCOUNTS.get(code, 0.0) if code else 0.0
    return round(total * (1 - rate), 2)
PY
commit "2024-02-02T09:00:00+00:00" "Add discount codes"

sed -i 's|    return unit_price \* quantity|    return round(unit_price * quantity)|' pricing.py
commit "2024-02-03T09:00:00+00:00" "Round line totals to whole units"

mkdir -p docs
cat > docs/API.md <<'MD'
# Pricing API

- `line_total(unit_price, quantity)`
- `order_total(lines, tax_rate=0.0)`
- `apply_discount(total, code=None)`
MD
commit "2024-02-04T09:00:00+00:00" "Document the API"

sed -i 's|DISCOUNTS = {"WELCOME10": 0.10}|DISCOUNTS = {"WELCOME10": 0.10, "BULK25": 0.25}|' pricing.py
echo '- discount codes: `WELCOME10` (10%), `BULK25` (25%)' >> docs/API.md
commit "2024-02-05T09:00:00+00:00" "Add bulk discount code"
