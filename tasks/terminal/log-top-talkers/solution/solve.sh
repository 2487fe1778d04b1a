#!/bin/bash
set -euo pipefail
cd /app
cat > top_talkers.sh <<'SH'
#!/bin/bash
# Top N client addresses by bytes sent, from a combined-format access log.
set -euo pipefail
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 LOGFILE [N]" >&2; exit 2; }
n=${2:-5}
awk -F'"' 'NF >= 3 {
    split($1, head, " "); split($3, tail, " ")
    bytes[head[1]] += (tail[2] == "-" ? 0 : tail[2])
} END { for (ip in bytes) print ip, bytes[ip] }' "$1" | sort -k2,2nr -k1,1 | head -n "$n"
SH
chmod +x top_talkers.sh
./top_talkers.sh logs/access.log 3
