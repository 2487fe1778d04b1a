"""greetlib: greetings for every occasion."""

from greetlib.core import greet

__all__ = ["greet"]
