#!/bin/bash
# validation needs Order only when validate runs: import it there, not at module import time.
set -euo pipefail
cd /app
python3 - <<'PY'
from pathlib import Path

p = Path("orders/validation.py")
s = p.read_text()
s = s.replace("from orders.models import Order\n\n", "from __future__ import annotations\n\nfrom typing import TYPE_CHECKING\n\n"
              "if TYPE_CHECKING:\n    from orders.models import Order\n\n")
s = s.replace("def validate(order: Order) -> None:\n", "def validate(order: Order) -> None:\n    from orders.models import Order\n\n")
p.write_text(s)
PY
python3 -m orders.cli alice A1:2:350 B2:1:99
