#!/bin/bash
# Builds shop.db from the SQL dump (a binary database is kept out of the task folder).
set -euo pipefail
python3 -c 'import sqlite3; sqlite3.connect("shop.db").executescript(open("data/shop.sql").read())'
