import sys

from greetlib import greet

print(greet(*sys.argv[1:3]))
