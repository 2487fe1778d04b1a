#!/bin/bash
set -euo pipefail
cd /app
first=$(git rev-list --max-parents=0 HEAD)
git bisect start HEAD "$first" >/dev/null
git bisect run ./check.sh > /tmp/bisect.log 2>&1 || true
bad=$(git rev-parse refs/bisect/bad)
git bisect reset >/dev/null 2>&1
echo "$bad" > FIRST_BAD_COMMIT
git log -1 --format='%H %s' "$bad"
