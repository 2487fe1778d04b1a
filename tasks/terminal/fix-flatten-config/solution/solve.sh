#!/bin/bash
# The recursive call must carry the full dotted prefix, not only the current key.
set -euo pipefail
cd /app
sed -i 's|out.update(flatten(v, k))|out.update(flatten(v, key))|' confkit/flat.py
python3 -m confkit example.json
