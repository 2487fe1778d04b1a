#!/bin/bash
# Missing headers (bool, isspace), a misspelt field and a missing semicolon.
set -euo pipefail
cd /app
sed -i 's|#include <stdio.h>|#include <ctype.h>\n#include <stdbool.h>\n#include <stdio.h>|' wordcount.c
sed -i 's|c->word++;|c->words++;|' wordcount.c
sed -i 's|    return 0$|    return 0;|' wordcount.c
gcc -std=c11 -Wall -Wextra -Werror -o wordcount wordcount.c
printf 'a b\nc\n' | ./wordcount
rm -f wordcount
