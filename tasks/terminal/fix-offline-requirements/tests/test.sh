#!/bin/bash
# Verifier: install the agent's requirements.txt offline from the verifier's own copy of the
# wheels into a fresh folder, then run the shipped report.py with them. Reward 1 when the
# install succeeds, every requirement is pinned with ==, and the report is right.
set -u
VDIR=/logs/verifier
mkdir -p "$VDIR"
rm -f "$VDIR/reward.txt"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
reward=0
ok=1
# report.py must be the shipped one
echo "e51f078869bfa1afbb0718bc8081d9b4085cd090426eb657816b7d2fe53a3173  /app/report.py" | sha256sum -c --quiet - || ok=0
# every requirement line pinned with ==
reqs=$(grep -v '^[[:space:]]*#' /app/requirements.txt | sed 's/#.*//' | grep -v '^[[:space:]]*$')
[ -n "$reqs" ] || ok=0
while IFS= read -r line; do
    [ -z "$line" ] && continue
    echo "$line" | grep -Eq '^[A-Za-z0-9._-]+[[:space:]]*==[[:space:]]*[0-9][0-9.]*[[:space:]]*$' || { echo "not pinned: $line"; ok=0; }
done <<< "$reqs"
if [ "$ok" -eq 1 ]; then
    cp /app/requirements.txt "$work/requirements.txt"
    if (cd "$work" && timeout 120 python3 -m pip install -q --no-cache-dir --disable-pip-version-check --root-user-action=ignore --no-index \
            --find-links /tests/vendor -r requirements.txt --target "$work/deps"); then
        mkdir "$work/data"
        head -c 1536 /dev/zero > "$work/data/b.bin"
        head -c 10 /dev/zero > "$work/data/a.txt"
        head -c 3145728 /dev/zero > "$work/data/c.img"
        # -I: modules the agent may have left in /app cannot stand in for the installed ones
        got=$(cd "$work" && timeout 30 python3 -I -c 'import runpy, sys
sys.path.insert(0, sys.argv[1])
sys.argv = ["report.py", sys.argv[2]]
runpy.run_path("/app/report.py", run_name="__main__")' "$work/deps" "$work/data")
        want=$(printf 'file   size\n-----  -------\na.txt  10 B\nb.bin  1.5 KiB\nc.img  3.0 MiB')
        if [ "$got" = "$want" ]; then
            reward=1
        else
            printf 'report output:\n%s\nexpected:\n%s\n' "$got" "$want"
        fi
    fi
fi
echo "$reward" > "$VDIR/reward.txt"
