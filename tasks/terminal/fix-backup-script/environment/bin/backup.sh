#!/bin/bash
# backup.sh SRC_DIR DEST_DIR
# Archive every file under SRC_DIR except *.tmp into DEST_DIR/NAME.tar.gz (NAME = the
# basename of SRC_DIR) and list the archived files in DEST_DIR/NAME.manifest.
src=$1
dest=$2
name=$(basename $src)
mkdir -p $dest
cd $src
files=$(find . -type f ! -name '*.tmp' | sed 's|^\./||' | sort)
tar -czf $dest/$name.tar.gz $files
echo "$files" > $dest/$name.manifest
echo "backed up $(echo "$files" | wc -l) files"
