#!/bin/bash
set -euo pipefail
cd /app
cat > bin/backup.sh <<'SH'
#!/bin/bash
# backup.sh SRC_DIR DEST_DIR
# Archive every file under SRC_DIR except *.tmp into DEST_DIR/NAME.tar.gz (NAME = the
# basename of SRC_DIR) and list the archived files in DEST_DIR/NAME.manifest.
set -euo pipefail
usage() { echo "usage: $(basename "$0") SRC_DIR DEST_DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
[ -d "$1" ] || usage
src=$(cd -- "$1" && pwd)
name=$(basename -- "$src")
mkdir -p -- "$2"
dest=$(cd -- "$2" && pwd)
list=$(mktemp)
trap 'rm -f "$list"' EXIT
(cd -- "$src" && find . -type f ! -name '*.tmp' -print | sed 's|^\./||' | LC_ALL=C sort) > "$list"
tar -czf "$dest/$name.tar.gz" -C "$src" --no-recursion --verbatim-files-from -T "$list"
cp "$list" "$dest/$name.manifest"
echo "backed up $(wc -l < "$list") files"
SH
chmod +x bin/backup.sh
d=$(mktemp -d)
bin/backup.sh sample "$d/out"
tar -tzf "$d/out/sample.tar.gz"
rm -rf "$d"
