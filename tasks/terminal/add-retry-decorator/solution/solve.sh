#!/bin/bash
set -euo pipefail
cd /app
cat > fetcher/retry.py <<'PY'
"""Retry a function call on selected exceptions."""

import functools
import time
from collections.abc import Callable


def retry(times: int, exceptions: tuple[type[BaseException], ...] = (Exception,), delay: float = 0.0,
          sleep: Callable[[float], None] = time.sleep):
    """Decorator: call the function up to `times` times while it raises one of `exceptions`."""
    if times < 1:
        raise ValueError("times must be at least 1")

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for attempt in range(1, times + 1):
                try:
                    return fn(*args, **kwargs)
                except exceptions:
                    if attempt == times:
                        raise
                    sleep(delay)
        return wrapper
    return decorate
PY
python3 - <<'PY'
from pathlib import Path

p = Path("fetcher/client.py")
s = p.read_text()
s = s.replace("from collections.abc import Callable\n",
              "from collections.abc import Callable\n\nfrom fetcher.retry import retry\n")
s = s.replace("def fetch_report(", "@retry(3, exceptions=(ConnectionError,), delay=0.5)\ndef fetch_report(")
p.write_text(s)
PY
