import unittest

from greetlib import greet


class GreetTest(unittest.TestCase):
    def test_default(self):
        self.assertEqual(greet("Ann"), "Have a nice day, Ann!")

    def test_occasion(self):
        self.assertEqual(greet("Bo", "trip"), "Have a nice trip, Bo!")
