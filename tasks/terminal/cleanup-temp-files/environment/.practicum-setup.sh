#!/bin/bash
# Builds the cluttered tree. It is generated rather than shipped: editor backups (*~), *.tmp
# files and empty folders do not survive in a git-tracked task folder.
set -euo pipefail
w=workspace
mkdir -p "$w/a" "$w/b/c" "$w/keep/empty" "$w/old" "$w/empty1" "$w/nested/empty2/empty3" "$w/mixed/sub" "$w/-odd dir"
put() { printf '%s\n' "$2" > "$w/$1"; }
put a/report.txt "quarterly report"
put "a/report.txt~" "quarterly report (backup)"
put a/cache.tmp "cache"
put b/c/.hidden.tmp "hidden temp"
put b/c/data.csv "x,y"
put keep/x.tmp "kept temp"
put "keep/y~" "kept backup"
put old/a.tmp "old temp"
put "old/b~" "old backup"
put "name with space.tmp" "spaced temp"
put notes.tmpl "a template, not a temp file"
put tmp.txt "not temp either"
put mixed/sub/a.tmp "temp"
put mixed/keep.me "stay"
put "-odd dir/-x.tmp" "dash temp"
put "-odd dir/real.txt" "dash real"
put "b/c/archive.tmp.gz" "not a .tmp name"
