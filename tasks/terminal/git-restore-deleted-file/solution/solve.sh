#!/bin/bash
set -euo pipefail
cd /app
f=migrations/0003_add_index.sql
gone=$(git rev-list -n 1 HEAD -- "$f")          # the commit that deleted it
git checkout "$gone^" -- "$f"
git commit -q -m "Restore $f"
git show --stat HEAD | tail -3
