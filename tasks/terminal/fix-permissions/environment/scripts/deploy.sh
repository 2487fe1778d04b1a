#!/bin/bash
# Deploy the site: sync the public data to the web root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
log "deploying"
