"""Hidden checks of textstats against an independent count."""

import random
import re
import subprocess
import sys
from collections import Counter


def expected(text, n):
    c = Counter(w.lower() for w in re.findall(r"[A-Za-z']+", text))
    return [f"{w} {k}" for w, k in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def run(path, *args):
    out = subprocess.run([sys.executable, "-m", "textstats", str(path), *args], cwd="/app", capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_sample():
    text = "The quick brown fox jumps over the lazy dog. The dog doesn't mind;\nthe fox DOESN'T care. Quick, quick!\n"
    assert run("/app/texts/sample.txt", "3") == ["the 4", "quick 3", "doesn't 2"] == expected(text, 3)


def test_random_texts(tmp_path):
    rng = random.Random(11)
    vocab = ["Alpha", "beta", "GAMMA", "delta", "it's", "Eps", "zeta", "eta"]
    for i in range(5):
        words = [rng.choice(vocab) for _ in range(rng.randrange(20, 200))]
        words = [w.upper() if rng.random() < 0.2 else w for w in words]
        text = " ".join(w + rng.choice(["", ",", ".", "!", " -", "\n"]) for w in words)
        p = tmp_path / f"t{i}.txt"
        p.write_text(text, encoding="utf-8")
        assert run(p, "4") == expected(text, 4)


def test_default_n(tmp_path):
    p = tmp_path / "d.txt"
    text = "a b c d e f g a b c a"
    p.write_text(text)
    assert run(p) == expected(text, 5) == ["a 3", "b 2", "c 2", "d 1", "e 1"]
