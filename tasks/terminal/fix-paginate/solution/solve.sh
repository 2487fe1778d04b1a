#!/bin/bash
# Pages are 1-based: page p starts at (p - 1) * per_page; a partial page still counts.
set -euo pipefail
cd /app
sed -i 's|    return total // per_page|    return -(-total // per_page)|' catalog/pagination.py
sed -i 's|    start = page \* per_page|    start = (page - 1) * per_page|' catalog/pagination.py
python3 -m pytest -q -p no:cacheprovider tests
