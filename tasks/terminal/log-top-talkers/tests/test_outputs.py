"""Hidden checks: the top talkers, recomputed here, on the shipped log and on unseen logs."""

import os
import subprocess
from collections import Counter

from genlog import access_log

SCRIPT = "/app/top_talkers.sh"


def expected(text, n=5):
    total = Counter()
    for line in text.splitlines():
        head, _request, rest = line.split('"', 2)
        size = rest.split()[1]
        total[head.split()[0]] += 0 if size == "-" else int(size)
    return [f"{ip} {b}" for ip, b in sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def run(*args):
    out = subprocess.run(["bash", SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=60, cwd="/tmp")
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_executable():
    assert os.access(SCRIPT, os.X_OK)


def test_shipped_log():
    text = access_log(7, 600)
    with open("/app/logs/access.log") as f:
        assert f.read() == text, "the log was modified"
    assert run("/app/logs/access.log") == expected(text)
    assert run("/app/logs/access.log", 3) == expected(text, 3)


def test_unseen_logs(tmp_path):
    for seed, n, top in ((11, 300, 5), (12, 2000, 10), (13, 40, 2)):
        p = tmp_path / f"l{seed}"
        text = access_log(seed, n)
        p.write_text(text)
        assert run(p, top) == expected(text, top), seed


def test_dashes_and_ties(tmp_path):
    p = tmp_path / "t.log"
    p.write_text(
        '10.0.0.2 - - [05/Mar/2024:00:00:01 +0000] "GET / HTTP/1.1" 200 100 "-" "a b"\n'
        '10.0.0.10 - - [05/Mar/2024:00:00:02 +0000] "GET / HTTP/1.1" 200 100 "-" "a"\n'
        '10.0.0.3 - - [05/Mar/2024:00:00:03 +0000] "GET / HTTP/1.1" 304 - "-" "a"\n'
        '10.0.0.3 - - [05/Mar/2024:00:00:04 +0000] "-" 400 0 "-" "-"\n'
        '10.0.0.9 - - [05/Mar/2024:00:00:05 +0000] "POST /x HTTP/1.1" 201 250 "-" "c"\n'
    )
    assert run(p) == ["10.0.0.9 250", "10.0.0.10 100", "10.0.0.2 100", "10.0.0.3 0"]
