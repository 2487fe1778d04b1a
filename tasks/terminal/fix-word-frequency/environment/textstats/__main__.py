import sys

from textstats.counting import top_words

text = open(sys.argv[1], encoding="utf-8").read()
n = int(sys.argv[2]) if len(sys.argv) > 2 else 5
for word, count in top_words(text, n):
    print(word, count)
