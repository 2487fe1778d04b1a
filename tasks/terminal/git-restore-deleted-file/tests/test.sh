#!/bin/bash
# Verifier: the committed file must be the last version before its deletion, in a new commit on
# top of the untouched history, with a clean tree. Reward 1 or 0.
set -u
VDIR=/logs/verifier
mkdir -p "$VDIR"
rm -f "$VDIR/reward.txt"
OLD_TIP=8c52820ad4f2373c1eff06f79315c5638e689b68      # "Add changelog" (setup's fixed dates)
WANT_SHA=44def488cab97c924ee10a90e6658fd045a66949af5396c14f4accf884d4926a  # sha256 of the content
F=migrations/0003_add_index.sql
g() { git -c safe.directory='*' -C /app "$@"; }
reward=0
if [ "$(g symbolic-ref -q HEAD)" != "refs/heads/main" ]; then
    echo "main is not checked out"
elif ! g merge-base --is-ancestor "$OLD_TIP" HEAD 2>/dev/null || [ "$(g rev-parse HEAD)" = "$OLD_TIP" ]; then
    echo "the history was rewritten, or nothing was committed"
elif [ "$(g show "HEAD:$F" 2>/dev/null | sha256sum | cut -d' ' -f1)" != "$WANT_SHA" ]; then
    echo "$F at HEAD is missing or differs from its last version"
elif [ -n "$(g status --porcelain --untracked-files=no)" ]; then
    echo "uncommitted changes"
elif [ -n "$(g diff --name-only "$OLD_TIP" HEAD -- . ":(exclude)$F")" ]; then
    echo "other files changed: $(g diff --name-only "$OLD_TIP" HEAD -- . ":(exclude)$F" | tr '\n' ' ')"
else
    reward=1
fi
echo "$reward" > "$VDIR/reward.txt"
