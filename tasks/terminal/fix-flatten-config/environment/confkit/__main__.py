import json
import sys

from confkit.flat import flatten

with open(sys.argv[1], encoding="utf-8") as f:
    for key, value in sorted(flatten(json.load(f)).items()):
        print(f"{key}={json.dumps(value)}")
