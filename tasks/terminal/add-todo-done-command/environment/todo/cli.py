"""Command line of the to-do list."""

import argparse

from todo import store


def cmd_add(args: argparse.Namespace) -> int:
    items = store.load(args.db)
    item = store.Item(store.next_id(items), " ".join(args.text))
    items.append(item)
    store.save(args.db, items)
    print(f"Added {item.id}: {item.text}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    for item in store.load(args.db):
        print(f"[ ] {item.id} {item.text}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="todo")
    p.add_argument("--db", default="todo.json", help="the list's JSON file")
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("add", help="add an item")
    a.add_argument("text", nargs="+")
    a.set_defaults(func=cmd_add)
    ls = sub.add_parser("list", help="show the items")
    ls.set_defaults(func=cmd_list)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
