#!/bin/bash
# Verifier: compile the agent's wordcount.c afresh (warnings are errors) and compare its counts
# with wc's on inputs it has not seen. Reward 1 only if it compiles and every case matches.
set -u
VDIR=/logs/verifier
mkdir -p "$VDIR"
rm -f "$VDIR/reward.txt"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
reward=0
if cp /app/wordcount.c "$work/wordcount.c" && \
   gcc -std=c11 -Wall -Wextra -Werror -o "$work/wc" "$work/wordcount.c"; then
    # the input cases: plain, no trailing newline, tabs and runs of blanks, empty, long, non-ASCII
    printf 'hello world\nsecond line here\n' > "$work/in1"
    printf 'no newline at end' > "$work/in2"
    printf '\t lead\t\ttabs  \n\n\n  trailing   \n' > "$work/in3"
    : > "$work/in4"
    cp /tests/words.txt "$work/in5"
    printf 'caf\xc3\xa9 na\xc3\xafve\r\nx\vy\fz\n' > "$work/in6"
    ok=1
    for f in "$work"/in*; do
        want="$(wc -l < "$f" | tr -d ' ') $(wc -w < "$f" | tr -d ' ') $(wc -c < "$f" | tr -d ' ')"
        got="$(timeout 10 "$work/wc" < "$f")"
        if [ "$got" != "$want" ]; then
            echo "mismatch on $(basename "$f"): got '$got', want '$want'"
            ok=0
        fi
    done
    [ "$ok" -eq 1 ] && reward=1
else
    echo "wordcount.c does not compile"
fi
echo "$reward" > "$VDIR/reward.txt"
