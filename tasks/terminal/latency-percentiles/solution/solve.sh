#!/bin/bash
set -euo pipefail
cd /app
cat > latency_report.py <<'PY'
"""Per-path latency summary (count, nearest-rank p50/p95, max) of a JSON-lines request log."""

import json
import math
import sys
from collections import defaultdict


def rank(values: list[float], p: float) -> float:
    return values[math.ceil(p / 100 * len(values)) - 1]


def main(src: str, dst: str) -> None:
    by_path: dict[str, list[float]] = defaultdict(list)
    with open(src, encoding="utf-8") as f:
        for line in f:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(entry, dict) and "path" in entry and "ms" in entry:
                by_path[entry["path"]].append(entry["ms"])
    report = {}
    for path, values in sorted(by_path.items()):
        values.sort()
        report[path] = {"count": len(values), "p50": rank(values, 50), "p95": rank(values, 95), "max": values[-1]}
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
PY
mkdir -p reports
python3 latency_report.py data/requests.jsonl reports/latency.json
head -8 reports/latency.json
