#!/bin/bash
# Add the `done` subcommand and the --pending filter of `list`.
set -euo pipefail
cd /app
python3 - <<'PY'
from pathlib import Path

p = Path("todo/cli.py")
s = p.read_text()
s = s.replace('''def cmd_list(args: argparse.Namespace) -> int:
    for item in store.load(args.db):
        print(f"[ ] {item.id} {item.text}")
    return 0
''', '''def cmd_list(args: argparse.Namespace) -> int:
    for item in store.load(args.db):
        if args.pending and item.done:
            continue
        print(f"[{'x' if item.done else ' '}] {item.id} {item.text}")
    return 0


def cmd_done(args: argparse.Namespace) -> int:
    items = store.load(args.db)
    for item in items:
        if item.id == args.id:
            item.done = True
            store.save(args.db, items)
            print(f"Completed {item.id}: {item.text}")
            return 0
    print(f"No item {args.id}", file=sys.stderr)
    return 1
''')
s = s.replace('''    ls.set_defaults(func=cmd_list)
''', '''    ls.add_argument("--pending", action="store_true", help="only the open items")
    ls.set_defaults(func=cmd_list)
    d = sub.add_parser("done", help="mark an item as done")
    d.add_argument("id", type=int)
    d.set_defaults(func=cmd_done)
''')
s = s.replace("import argparse\n", "import argparse\nimport sys\n", 1)
p.write_text(s)
PY
db=$(mktemp -u)
python3 -m todo --db "$db" add try it
python3 -m todo --db "$db" done 1
python3 -m todo --db "$db" list
rm -f "$db"
