"""Hidden checks: errors per hour recomputed from the verifier's own copy of the logs."""

import csv
import gzip
import re
from collections import Counter
from pathlib import Path

NAMES = ["app.log.3.gz", "app.log.2.gz", "app.log.1", "app.log"]
ENTRY = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d):\d\d:\d\dZ (\w+) ")


def text(folder, name):
    data = (Path(folder) / name).read_bytes()
    return (gzip.decompress(data) if name.endswith(".gz") else data).decode()


def test_logs_unchanged():
    for name in NAMES:
        assert text("/app/logs", name) == text("/tests/logs", name), name


def test_counts():
    counts = Counter()
    for name in NAMES:
        for line in text("/tests/logs", name).splitlines():
            m = ENTRY.match(line)
            if m and m.group(2) == "ERROR":
                counts[m.group(1)] += 1
    with open("/app/reports/errors_per_hour.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["hour", "errors"]
    assert rows[1:] == [[h, str(c)] for h, c in sorted(counts.items())]
    assert len(rows) > 5
