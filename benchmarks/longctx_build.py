"""Time to build one 1M-token longctx task, from a cold process.

What is timed, separately: loading the corpus (reading and converting the text), generating the
task (the question, the answer key and the haystack recipe: which documents, which plants), the
standard library index where the kind reads it (multihop, aggregation: an AST pass, cached
under PRACTICUM_HOME after the first build), and writing the agentic haystack folder (every document, plants in place). Tokens are
counted as characters / 4.

    python benchmarks/longctx_build.py                    # stdlib corpus, needle, 1M tokens, 3 builds
    python benchmarks/longctx_build.py --corpus kjv --kind conflict --tokens 1000000
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from practicum.domains.longctx import corpus as corpora
from practicum.domains.longctx.env import Haystacks
from practicum.domains.longctx.generators import KINDS, make


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="stdlib", choices=corpora.CORPORA)
    ap.add_argument("--kind", default="needle", choices=KINDS)
    ap.add_argument("--tokens", type=int, default=1_000_000)
    ap.add_argument("--distractors", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="longctx-bench-"))
    try:
        t0 = time.perf_counter()
        corpus = corpora.load(args.corpus)
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        mined = args.corpus == "stdlib" and args.kind in ("multihop", "aggregation")  # the kinds that read the index
        if mined:
            corpora.stdlib_index(work / "cache")
        index_s = time.perf_counter() - t0
        gen, write = [], []
        for seed in range(args.repeats):
            t0 = time.perf_counter()
            made = make(corpus, args.kind, seed, args.tokens, args.distractors, work / "cache")
            gen.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            Haystacks.build(made.recipe, work / f"h{seed}")
            write.append(time.perf_counter() - t0)
        print(f"corpus {args.corpus} ({corpus.version}): {len(corpus.docs)} documents, "
              f"{sum(len(d.text) for d in corpus.docs):,} characters, loaded in {load_s:.2f} s")
        if mined:
            print(f"stdlib index (AST of every module, first build only): {index_s:.2f} s")
        print(f"task: {args.kind}, {made.tokens:,} tokens ({made.chars:,} characters) in {len(made.recipe.paths)} files")
        print(f"generate (question, key, recipe): best {min(gen):.3f} s, mean {sum(gen) / len(gen):.3f} s")
        print(f"write the agentic haystack folder: best {min(write):.3f} s, mean {sum(write) / len(write):.3f} s")
        print(f"1M-token task, cold process: {load_s + index_s + gen[0] + write[0]:.2f} s "
              f"(warm: {min(gen) + min(write):.2f} s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
