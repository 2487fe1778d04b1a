from collections import Counter

from textstats.tokenize import words


def top_words(text: str, n: int = 5) -> list[tuple[str, int]]:
    counts = Counter(words(text))
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]))
    return ranked[:n]
