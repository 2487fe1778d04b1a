#!/bin/bash
# The default list of Bin.__init__ is created once and shared by every Bin built without one.
set -euo pipefail
cd /app
python3 - <<'PY'
from pathlib import Path

p = Path("inventory/bins.py")
s = p.read_text()
s = s.replace("entries: list[tuple[str, int]] = []):", "entries: list[tuple[str, int]] | None = None):")
s = s.replace("self.entries = entries\n", "self.entries = list(entries) if entries is not None else []\n")
p.write_text(s)
PY
