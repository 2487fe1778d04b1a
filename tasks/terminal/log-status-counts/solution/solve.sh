#!/bin/bash
set -euo pipefail
cd /app
cat > status_counts.sh <<'SH'
#!/bin/bash
# Count requests per HTTP status in a combined-format access log.
# The status is the first field after the quoted request, which may itself be "-".
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 ACCESS_LOG" >&2; exit 2; }
awk -F'"' 'NF >= 3 { split($3, f, " "); if (f[1] != "") print f[1] }' "$1" \
    | sort | uniq -c | awk '{ print $2, $1 }' | sort -k2,2nr -k1,1n
SH
chmod +x status_counts.sh
mkdir -p reports
./status_counts.sh logs/access.log > reports/status_counts.txt
cat reports/status_counts.txt
