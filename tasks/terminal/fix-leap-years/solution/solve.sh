#!/bin/bash
# Gregorian rule: every 4th year, except centuries, except every 4th century.
set -euo pipefail
cd /app
sed -i 's|    return year % 4 == 0$|    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)|' calendarx/rules.py
grep -q "year % 400" calendarx/rules.py
