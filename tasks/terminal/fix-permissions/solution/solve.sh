#!/bin/bash
set -euo pipefail
cd /app
chmod 755 scripts/deploy.sh scripts/rotate-logs.sh
chmod 644 scripts/lib.sh
chmod 700 secrets
chmod 600 secrets/*
chmod 775 data/uploads
ls -la scripts secrets data
