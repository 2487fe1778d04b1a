#!/bin/bash
# Verifier: runs the hidden tests in /tests against the workspace and writes the reward:
# 1 when every one of the 4 tests ran and passed, 0 otherwise.
set -u
VDIR=/logs/verifier
mkdir -p "$VDIR"
rm -f "$VDIR/junit.xml" "$VDIR/reward.txt"
cd /tests || exit 1
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
# -I: nothing the agent left in the workspace (a pytest.py, an xml package) shadows the tools.
timeout 300 python3 -I -B -m pytest -q -p no:cacheprovider -c /dev/null --rootdir=/tests \
    --junitxml="$VDIR/junit.xml" /tests/test_outputs.py
rc=$?
reward=0
# The count comes from the junit report, so a program that exits the test process early with
# status 0 does not pass for a green run.
if [ "$rc" -eq 0 ] && python3 -I -B - "$VDIR/junit.xml" 4 <<'PY'
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
