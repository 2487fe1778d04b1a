#!/bin/sh
# Rotate the application's logs.
find /var/log/app -name '*.log' -size +10M -exec gzip {} \;
