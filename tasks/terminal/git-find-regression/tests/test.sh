#!/bin/bash
# Verifier: the answer file must name the first failing commit; main must be checked out with
# no tracked changes and the history untouched. Reward 1 or 0.
set -u
VDIR=/logs/verifier
mkdir -p "$VDIR"
rm -f "$VDIR/reward.txt"
FIRST_BAD=1375054e6605479464778b841e1632a672f84c0e  # "Tidy up helpers" (setup's fixed dates)
TIP=fe77411726fdfaefc9f95aedd17b81cdcca38c27       # main's tip, as the setup leaves it
g() { git -c safe.directory='*' -C /app "$@"; }
reward=0
answer=$( [ -f /app/FIRST_BAD_COMMIT ] && tr -d '[:space:]' < /app/FIRST_BAD_COMMIT)
if [ "$answer" != "$FIRST_BAD" ]; then
    echo "FIRST_BAD_COMMIT holds '$answer'"
elif [ "$(g symbolic-ref -q HEAD)" != "refs/heads/main" ]; then
    echo "main is not checked out"
elif [ "$(g rev-parse HEAD)" != "$TIP" ]; then
    echo "main moved: $(g rev-parse HEAD)"
elif [ -n "$(g status --porcelain --untracked-files=no)" ]; then
    echo "tracked files changed"
else
    reward=1
fi
echo "$reward" > "$VDIR/reward.txt"
