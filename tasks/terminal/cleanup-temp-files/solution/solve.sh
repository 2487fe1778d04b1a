#!/bin/bash
set -euo pipefail
cd /app/workspace
find . -path ./keep -prune -o -type f \( -name '*.tmp' -o -name '*~' \) -exec rm -f -- {} +
# -delete implies -depth, which disables -prune: exclude keep/ by path instead
find . -mindepth 1 -type d -empty ! -path ./keep ! -path './keep/*' -delete
find . | sort
