#!/bin/bash
# Verifier: compare every mode and content under /app with what the task asks for.
# Reward 1 only when all match.
set -u
VDIR=/logs/verifier
mkdir -p "$VDIR"
rm -f "$VDIR/reward.txt"
cd /app || { echo 0 > "$VDIR/reward.txt"; exit 0; }
ok=1
expect_mode() {  # expect_mode MODE PATH
    local got
    got=$(stat -c %a "$2" 2>/dev/null || echo missing)
    if [ "$got" != "$1" ]; then echo "$2: mode $got, want $1"; ok=0; fi
}
expect_mode 755 scripts/deploy.sh
expect_mode 755 scripts/rotate-logs.sh
expect_mode 644 scripts/lib.sh
expect_mode 700 secrets
expect_mode 600 secrets/api.key
expect_mode 600 secrets/db.env
expect_mode 775 data/uploads
expect_mode 644 data/uploads/README.txt
expect_mode 644 data/public/index.html
expect_mode 755 data/public
expect_mode 755 data
expect_mode 755 scripts
# no other file is executable, nothing world-writable, and no file was added or removed
extra=$(find scripts secrets data -type f -perm /111 ! -name deploy.sh ! -name rotate-logs.sh)
[ -z "$extra" ] || { echo "unexpectedly executable: $extra"; ok=0; }
ww=$(find scripts secrets data -perm -002)
[ -z "$ww" ] || { echo "world-writable: $ww"; ok=0; }
# contents unchanged (sha256 of the shipped files)
sha256sum -c --quiet /tests/contents.sha256 || ok=0
[ "$(find scripts secrets data -type f | wc -l)" -eq "$(wc -l < /tests/contents.sha256)" ] || { echo "files added or removed"; ok=0; }
echo "$ok" > "$VDIR/reward.txt"
