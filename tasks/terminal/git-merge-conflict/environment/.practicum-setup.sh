#!/bin/bash
# Builds the repository and its two diverging branches (git history cannot ship as plain files).
# Identity and dates are fixed, so the commit ids are the same on every run.
set -euo pipefail
export GIT_AUTHOR_NAME="Dana Dev" GIT_AUTHOR_EMAIL=dana@example.com
export GIT_COMMITTER_NAME="Dana Dev" GIT_COMMITTER_EMAIL=dana@example.com
commit() {
    export GIT_AUTHOR_DATE="$1" GIT_COMMITTER_DATE="$1"
    shift
    git add -A
    git commit -q -m "$*"
}
git init -q -b main
git config user.name "Dana Dev"
git config user.email dana@example.com
git config commit.gpgsign false

mkdir -p greeter
cat > greeter/__init__.py <<'PY'
from greeter.greet import greet

__all__ = ["greet"]
PY
cat > greeter/greet.py <<'PY'
"""Greetings."""


def greet(name):
    return "Hello, " + name + "!"
PY
cat > README.md <<'MD'
# greeter

`greet(name)` returns a friendly greeting.
MD
commit "2024-01-10T10:00:00+00:00" "Initial greeter"

git checkout -q -b feature/locale
cat > greeter/greet.py <<'PY'
"""Greetings."""

GREETINGS = {"en": "Hello", "fr": "Bonjour", "es": "Hola"}


def greet(name, lang="en"):
    return GREETINGS[lang] + ", " + name + "!"
PY
cat >> README.md <<'MD'

Pass `lang="fr"` or `lang="es"` to greet in French or Spanish.
MD
commit "2024-01-11T09:30:00+00:00" "Greet in the user's language"

git checkout -q main
cat > greeter/greet.py <<'PY'
"""Greetings."""


def greet(name, shout=False):
    text = "Hello, " + name + "!"
    return text.upper() if shout else text
PY
cat >> README.md <<'MD'

Pass `shout=True` to get the greeting in capitals.
MD
commit "2024-01-11T14:00:00+00:00" "Add shout option"
