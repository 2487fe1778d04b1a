"""Deterministic request logs in JSON lines, with a few damaged lines."""

import json
import random


def requests_log(seed: int, n: int) -> str:
    rng = random.Random(seed)
    paths = ["/api/items", "/api/items/{id}", "/api/orders", "/login", "/health"]
    lines = []
    for i in range(n):
        r = rng.random()
        if r < 0.02:
            lines.append("")
        elif r < 0.04:
            lines.append('{"ts": 1709640000, "path": "/api/ord')  # truncated write
        elif r < 0.05:
            lines.append('["not", "an", "object"]')
        else:
            path = rng.choice(paths)
            ms = round(rng.lognormvariate(4 if path != "/health" else 1, 0.8), 1)
            lines.append(json.dumps({"ts": 1709640000 + i, "path": path, "ms": ms,
                                     "status": rng.choice([200] * 9 + [500])}))
    return "\n".join(lines) + "\n"
