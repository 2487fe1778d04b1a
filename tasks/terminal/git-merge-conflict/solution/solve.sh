#!/bin/bash
set -euo pipefail
cd /app
git merge feature/locale >/dev/null 2>&1 || true   # stops on conflicts, as expected
cat > greeter/greet.py <<'PY'
"""Greetings."""

GREETINGS = {"en": "Hello", "fr": "Bonjour", "es": "Hola"}


def greet(name, lang="en", shout=False):
    text = GREETINGS[lang] + ", " + name + "!"
    return text.upper() if shout else text
PY
cat > README.md <<'MD'
# greeter

`greet(name)` returns a friendly greeting.

Pass `lang="fr"` or `lang="es"` to greet in French or Spanish.

Pass `shout=True` to get the greeting in capitals.
MD
git add greeter/greet.py README.md
git commit -q --no-edit
git log --oneline --graph | head -5
