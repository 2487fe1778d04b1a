"""Print a table of the files in a folder with human-readable sizes."""

import os
import sys

import humansize
import tinytable


def main(folder: str) -> None:
    rows = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            rows.append((name, humansize.naturalsize(os.path.getsize(path))))
    print(tinytable.render(("file", "size"), rows))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "vendor")
