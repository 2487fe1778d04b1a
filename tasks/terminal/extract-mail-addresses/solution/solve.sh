#!/bin/bash
set -euo pipefail
cd /app
mkdir -p out
python3 - <<'PY'
from email import policy
from email.parser import BytesParser
from email.utils import getaddresses
from pathlib import Path

skip = {line.strip().lower() for line in Path("unsubscribed.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")}
found = set()
for path in sorted(Path("inbox").glob("*.eml")):
    msg = BytesParser(policy=policy.compat32).parse(path.open("rb"))
    values = [v for h in ("From", "To", "Cc") for v in msg.get_all(h, [])]
    for _name, addr in getaddresses(values):
        if "@" in addr:
            found.add(addr.lower())
Path("out/contacts.txt").write_text("".join(a + "\n" for a in sorted(found - skip)))
PY
cat out/contacts.txt
