#!/bin/bash
set -euo pipefail
cd /app
cat > convert.py <<'PY'
"""Summarise a staff CSV per department as JSON."""

import csv
import json
import sys


def main(src: str, dst: str) -> None:
    depts: dict[str, list[dict[str, str]]] = {}
    with open(src, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            depts.setdefault(row["department"], []).append(row)
    out = {}
    for name, rows in sorted(depts.items()):
        salaries = [float(r["salary"].strip()) for r in rows]
        out[name] = {
            "count": len(rows),
            "average_salary": round(sum(salaries) / len(salaries), 2),
            "earliest_start": min(r["start_date"] for r in rows),
            "employees": sorted(r["name"] for r in rows),
        }
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=2)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
PY
mkdir -p out
python3 convert.py data/staff.csv out/departments.json
