#!/bin/bash
set -euo pipefail
cd /app
python3 - <<'PY'
import ast
from pathlib import Path

src = Path("shop/app.py").read_text()
tree = ast.parse(src)
lines = src.splitlines(keepends=True)


def chunk(name):
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return "".join(lines[node.lineno - 1:node.end_lineno])


Path("shop/parsing.py").write_text(
    '"""Parse order files: one `SKU QTY UNIT_PRICE` line per item, `#` starts a comment."""\n\n'
    "from decimal import Decimal\n\n\n" + chunk("parse_order_line") + "\n\n" + chunk("parse_orders"))
Path("shop/pricing.py").write_text(
    '"""Order totals and discounts."""\n\n'
    "from decimal import ROUND_HALF_UP, Decimal\n\n\n" + chunk("apply_discount") + "\n\n" + chunk("compute_total"))
Path("shop/app.py").write_text(
    '"""Print a receipt for an order file: one `SKU QTY UNIT_PRICE` line per item."""\n\n'
    "import sys\nfrom decimal import Decimal\n\n"
    "from shop.parsing import parse_order_line, parse_orders  # noqa: F401  (re-exported)\n"
    "from shop.pricing import apply_discount, compute_total  # noqa: F401  (re-exported)\n\n\n"
    + chunk("format_receipt") + "\n\n" + chunk("main")
    + '\n\nif __name__ == "__main__":\n    sys.exit(main(sys.argv))\n')
PY
python3 -m shop.app order.txt 10
