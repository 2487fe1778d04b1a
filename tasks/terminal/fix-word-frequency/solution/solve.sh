#!/bin/bash
# Lower-case before matching (letters of either case), and rank by count descending then word.
set -euo pipefail
cd /app
sed -i 's|WORD = re.compile(r"\[a-z'"'"'\]+")|WORD = re.compile(r"[A-Za-z'"'"']+")|' textstats/tokenize.py
sed -i 's|    return WORD.findall(text)|    return WORD.findall(text.lower())|' textstats/tokenize.py
sed -i 's|key=lambda kv: (kv\[1\], kv\[0\])|key=lambda kv: (-kv[1], kv[0])|' textstats/counting.py
python3 -m textstats texts/sample.txt 3
