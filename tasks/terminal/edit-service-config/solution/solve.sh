#!/bin/bash
# Edit in place with sed so that comments and layout survive (configparser would drop comments).
set -euo pipefail
cd /srv/billing
f=config/service.ini
sed -i \
    -e '/^\[server\]/,/^\[/ s/^port = .*/port = 8443/' \
    -e '/^\[server\]/,/^\[/ s|^tls = .*|tls = true\ncert_file = /etc/billing/tls/cert.pem\nkey_file = /etc/billing/tls/key.pem|' \
    -e '/^\[database\]/,/^\[/ s/^pool_size = .*/pool_size = 20/' \
    -e '/^\[logging\]/,/^\[/ s/^level = .*/level = INFO/' \
    "$f"
printf '\n[cache]\nbackend = redis\nurl = redis://cache.internal:6379/0\nttl_s = 300\n' >> "$f"
cat "$f"
