#!/bin/bash
# Verifier: runs the hidden tests in /tests against the workspace and writes the reward:
# 1 when every one of the 3 tests ran and passed, 0 otherwise.
set -u
VDIR=/logs/verifier
mkdir -p "$VDIR"
rm -f "$VDIR/junit.xml" "$VDIR/reward.txt"
# This task has a Dockerfile, so it runs in its image (python:3.11-slim, which has no pytest):
# the standard Terminal-Bench bootstrap brings pytest (Practicum serves it offline).
apt-get update >/dev/null 2>&1
apt-get install -y curl >/dev/null 2>&1
curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh >/dev/null 2>&1
source "$HOME/.local/bin/env"
cd /tests || exit 1
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
timeout 300 uvx -w pytest==8.4.1 pytest -q -p no:cacheprovider -c /dev/null --rootdir=/tests \
    --junitxml="$VDIR/junit.xml" /tests/test_outputs.py
rc=$?
reward=0
# The count comes from the junit report, so a program that exits the test process early with
# status 0 does not pass for a green run.
if [ "$rc" -eq 0 ] && python3 -I -B - "$VDIR/junit.xml" 3 <<'PY'
import sys
import xml.etree.ElementTree as ET

root = ET.parse(sys.argv[1]).getroot()
suite = root if root.tag == "testsuite" else root.find("testsuite")
ran = int(suite.get("tests", 0))
bad = sum(int(suite.get(k, 0)) for k in ("failures", "errors", "skipped"))
sys.exit(0 if ran == int(sys.argv[2]) and bad == 0 else 1)
PY
then
    reward=1
fi
echo "$reward" > "$VDIR/reward.txt"
