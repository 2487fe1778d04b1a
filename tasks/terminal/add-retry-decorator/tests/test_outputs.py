"""Hidden checks of retry and of its use in the client."""

import sys
import time

import pytest

sys.path.insert(0, "/app")

from fetcher import client  # noqa: E402
from fetcher.retry import retry  # noqa: E402


class Flaky:
    def __init__(self, failures, exc=ConnectionError):
        self.failures, self.exc, self.calls = failures, exc, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.exc(f"failure {self.calls}")
        return (args, kwargs)


def test_succeeds_after_failures():
    sleeps = []
    f = Flaky(2)
    g = retry(3, delay=0.25, sleep=sleeps.append)(f)
    assert g(1, k=2) == ((1,), {"k": 2})
    assert f.calls == 3
    assert sleeps == [0.25, 0.25]


def test_gives_up_with_last_exception():
    sleeps = []
    f = Flaky(5)
    g = retry(3, exceptions=(ConnectionError,), sleep=sleeps.append)(f)
    with pytest.raises(ConnectionError, match="failure 3"):
        g()
    assert f.calls == 3
    assert len(sleeps) == 2


def test_other_exceptions_propagate_at_once():
    f = Flaky(1, exc=KeyError)
    g = retry(4, exceptions=(ConnectionError,), sleep=lambda s: None)(f)
    with pytest.raises(KeyError):
        g()
    assert f.calls == 1


def test_times_validated():
    with pytest.raises(ValueError):
        retry(0)


def test_single_attempt_no_sleep():
    sleeps = []
    f = Flaky(1)
    with pytest.raises(ConnectionError):
        retry(1, sleep=sleeps.append)(f)()
    assert sleeps == []


def test_wraps():
    def documented():
        """Docs."""
        return 1

    g = retry(2)(documented)
    assert g.__name__ == "documented" and g.__doc__ == "Docs."
    assert g() == 1


def test_client_retries_connection_errors():
    calls = []

    def source(name):
        calls.append(name)
        if len(calls) < 3:
            raise ConnectionError("dropped")
        return {"rows": [1, 2]}

    t0 = time.monotonic()
    assert client.fetch_report(source, "q1") == {"rows": [1, 2]}
    assert calls == ["q1"] * 3
    assert 0.95 <= time.monotonic() - t0 < 5  # two delays of 0.5 s


def test_client_does_not_retry_bad_reports():
    calls = []

    def source(name):
        calls.append(name)
        raise ConnectionError("down") if len(calls) < 10 else None

    with pytest.raises(ConnectionError):
        client.fetch_report(source, "q")
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(ValueError):
        client.fetch_report(lambda n: calls.append(n) or {}, "r")
    assert calls == ["r"]
