#!/bin/bash
# File modes do not survive in a task folder (git keeps only the executable bit): set the
# broken ones the task starts from.
set -euo pipefail
chmod 644 scripts/deploy.sh scripts/rotate-logs.sh scripts/lib.sh data/public/index.html data/uploads/README.txt
chmod 666 secrets/api.key secrets/db.env
chmod 777 secrets data/uploads
chmod 755 scripts data data/public
