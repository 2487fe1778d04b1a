"""The to-do list lives in a JSON file: {"items": [{"id": 1, "text": "...", "done": false}, ...]}."""

import json
import os
from dataclasses import asdict, dataclass


@dataclass
class Item:
    id: int
    text: str
    done: bool = False


def load(path: str) -> list[Item]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [Item(**raw) for raw in json.load(f)["items"]]


def save(path: str, items: list[Item]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"items": [asdict(i) for i in items]}, f, indent=2)
    os.replace(tmp, path)


def next_id(items: list[Item]) -> int:
    return max((i.id for i in items), default=0) + 1
