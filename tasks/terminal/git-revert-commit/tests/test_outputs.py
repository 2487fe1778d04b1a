"""Hidden checks: the bad commit is undone by a new commit; history and later work are kept."""

import subprocess

import pytest

HISTORY = [  # fixed by the setup's dates and identity, oldest first
    "ab83bd16267442c0016dc16f89a68e5bf8bf290d",  # Add price calculator
    "c884fcc894106b85212ac8642f3415218dcf4fdf",  # Add discount codes
    "271cd6d846ffadc0781662a4b77535e71e382100",  # Round line totals to whole units
    "77fa6aa51bf13c5f6ed084a093e1cc5b8d03eac8",  # Document the API
    "f5c9278d648a5817c5c4612a1a4b9f8598fa14e0",  # Add bulk discount code
]


def git(*args, check=True):
    r = subprocess.run(["git", "-c", "safe.directory=*", *args], cwd="/app", capture_output=True, text=True,
                       timeout=30)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def test_history_kept_and_extended():
    assert git("symbolic-ref", "HEAD").stdout.strip() == "refs/heads/main"
    head = git("rev-parse", "HEAD").stdout.strip()
    assert head not in HISTORY, "the fix must be a new commit"
    for c in HISTORY:
        assert git("merge-base", "--is-ancestor", c, "HEAD", check=False).returncode == 0, c


def test_clean_tree():
    assert git("status", "--porcelain", "--untracked-files=no").stdout == ""


def test_committed_behaviour():
    ns = {}
    exec(compile(git("show", "HEAD:pricing.py").stdout, "pricing.py", "exec"), ns)
    assert ns["line_total"](19.99, 3) == pytest.approx(59.97)
    assert ns["order_total"]([(19.99, 3), (0.5, 3)], tax_rate=0.1) == pytest.approx(67.62)
    assert ns["apply_discount"](100.0, "BULK25") == pytest.approx(75.0)
    assert ns["apply_discount"](100.0, "WELCOME10") == pytest.approx(90.0)


def test_later_docs_kept():
    docs = git("show", "HEAD:docs/API.md").stdout
    assert "`BULK25` (25%)" in docs and "`order_total(lines, tax_rate=0.0)`" in docs
