import sys

from units.convert import convert

value, src, dst = float(sys.argv[1]), sys.argv[2], sys.argv[3]
try:
    print(round(convert(value, src, dst), 4))
except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
