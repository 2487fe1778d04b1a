#!/bin/bash
# The distribution is called tinytable and only 1.3.0 is vendored; humansize was skipped by a
# marker that never matches on Python 3, and report.py needs naturalsize, which 2.1.0 has.
set -euo pipefail
cd /app
cat > requirements.txt <<'REQ'
# Runtime dependencies of report.py (installed offline from vendor/)
tinytable==1.3.0
humansize==2.1.0
REQ
python3 -m pip install -q --no-cache-dir --root-user-action=ignore --no-index --find-links vendor -r requirements.txt --target .deps
PYTHONPATH=.deps python3 report.py
