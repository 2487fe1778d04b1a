#!/bin/bash
# Builds a 24-commit history in which one commit breaks mean(). Identity and dates are fixed,
# so the commit ids are the same on every run.
set -euo pipefail
export GIT_AUTHOR_NAME="Lee Maint" GIT_AUTHOR_EMAIL=lee@example.com
export GIT_COMMITTER_NAME="Lee Maint" GIT_COMMITTER_EMAIL=lee@example.com
n=0
commit() {
    n=$((n + 1))
    export GIT_AUTHOR_DATE="2024-04-01T10:$(printf %02d "$n"):00+00:00" GIT_COMMITTER_DATE="2024-04-01T10:$(printf %02d "$n"):00+00:00"
    git add -A
    git commit -q -m "$*"
}
git init -q -b main
git config user.name "Lee Maint"
git config user.email lee@example.com
git config commit.gpgsign false

cat > stats.py <<'PY'
"""Small statistics helpers."""


def mean(xs):
    return sum(xs) / len(xs)
PY
cat > check.sh <<'SH'
#!/bin/bash
# Quick sanity check of stats.py: exits 0 when the helpers give the right answers.
python3 - <<'PYCHECK'
import stats

assert stats.mean([1, 2]) == 1.5, stats.mean([1, 2])
assert stats.mean([2, 4, 9]) == 5
print("ok")
PYCHECK
SH
chmod +x check.sh
echo "# Changelog" > CHANGELOG.md
commit "Start stats helpers"

add() {  # add(name, body, message): append a helper and a changelog line, then commit
    printf '\n\n%s\n' "$2" >> stats.py
    echo "- $1" >> CHANGELOG.md
    commit "$3"
}
add median 'def median(xs):
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2' "Add median"
add mode 'def mode(xs):
    return max(sorted(set(xs)), key=xs.count)' "Add mode"
add spread 'def spread(xs):
    return max(xs) - min(xs)' "Add spread"
sed -i 's|"""Small statistics helpers."""|"""Small statistics helpers (pure Python, no numpy)."""|' stats.py
commit "Say that stats is pure Python"
add variance 'def variance(xs):
    m = mean(xs)
    return sum((x - m) ** 2 for x in xs) / len(xs)' "Add variance"
add stdev 'def stdev(xs):
    return variance(xs) ** 0.5' "Add stdev"
echo "Run ./check.sh before committing." >> CHANGELOG.md
commit "Note the check script"
add clamp 'def clamp(x, lo, hi):
    return max(lo, min(hi, x))' "Add clamp"
add zscores 'def zscores(xs):
    m, s = mean(xs), stdev(xs)
    return [(x - m) / s for x in xs]' "Add zscores"
sed -i 's|^def mean(xs):|def mean(xs):\n    if not xs:\n        raise ValueError("mean of nothing")|' stats.py
commit "Reject empty input in mean"
add total 'def total(xs):
    return sum(xs)' "Add total"
add cumulative 'def cumulative(xs):
    out, acc = [], 0
    for x in xs:
        acc += x
        out.append(acc)
    return out' "Add cumulative sums"
sed -i 's|    return sum(xs) / len(xs)|    return sum(xs) // len(xs)|' stats.py
sed -i 's|- total|- total (sum of values)|' CHANGELOG.md
commit "Tidy up helpers"
add percentile 'def percentile(xs, p):
    s = sorted(xs)
    k = max(0, min(len(s) - 1, round(p / 100 * (len(s) - 1))))
    return s[k]' "Add percentile"
add iqr 'def iqr(xs):
    return percentile(xs, 75) - percentile(xs, 25)' "Add iqr"
sed -i 's|^def mode(xs):|def mode(xs):\n    """Most common value; the smallest among ties."""|' stats.py
commit "Document mode"
add normalize 'def normalize(xs):
    lo, hi = min(xs), max(xs)
    return [(x - lo) / (hi - lo) for x in xs]' "Add normalize"
add midrange 'def midrange(xs):
    return (max(xs) + min(xs)) / 2' "Add midrange"
add count_if 'def count_if(xs, pred):
    return sum(1 for x in xs if pred(x))' "Add count_if"
echo "- internal tidying" >> CHANGELOG.md
commit "Tidy up changelog"
add rms 'def rms(xs):
    return (sum(x * x for x in xs) / len(xs)) ** 0.5' "Add rms"
add harmonic_mean 'def harmonic_mean(xs):
    return len(xs) / sum(1 / x for x in xs)' "Add harmonic mean"
add geometric_mean 'def geometric_mean(xs):
    prod = 1.0
    for x in xs:
        prod *= x
    return prod ** (1 / len(xs))' "Add geometric mean"
