"""Hidden checks: the requested settings, nothing else changed, comments kept."""

import configparser
from pathlib import Path

PATH = Path("/srv/billing/config/service.ini")
CHANGES = {
    ("server", "port"): "8443",
    ("server", "tls"): "true",
    ("server", "cert_file"): "/etc/billing/tls/cert.pem",
    ("server", "key_file"): "/etc/billing/tls/key.pem",
    ("database", "pool_size"): "20",
    ("logging", "level"): "INFO",
    ("cache", "backend"): "redis",
    ("cache", "url"): "redis://cache.internal:6379/0",
    ("cache", "ttl_s"): "300",
}


def parse(text):
    cp = configparser.ConfigParser(interpolation=None)
    cp.read_string(text)
    return {(s, k): v for s in cp.sections() for k, v in cp.items(s)}


def test_requested_values():
    got = parse(PATH.read_text())
    for key, value in CHANGES.items():
        assert got.get(key) == value, key


def test_nothing_else_changed():
    want = parse(Path("/tests/original.ini").read_text())
    want.update(CHANGES)
    assert parse(PATH.read_text()) == want


def test_comments_kept_in_order():
    comments = [line for line in Path("/tests/original.ini").read_text().splitlines() if line.startswith(";")]
    now = [line.strip() for line in PATH.read_text().splitlines() if line.strip().startswith((";", "#"))]
    assert now == comments
