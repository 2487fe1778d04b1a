#!/bin/bash
set -euo pipefail
cd /app
mkdir -p reports
{
    echo "hour,errors"
    { zcat logs/app.log.3.gz logs/app.log.2.gz; cat logs/app.log.1 logs/app.log; } \
        | awk '$2 == "ERROR" && $1 ~ /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T/ { print substr($1, 1, 13) }' \
        | sort | uniq -c | awk '{ print $2 "," $1 }'
} > reports/errors_per_hour.csv
cat reports/errors_per_hour.csv
