import unittest

from greet import greet


class GreetTest(unittest.TestCase):
    def test_greets_by_name(self):
        self.assertIn("Ada", greet("Ada"))


if __name__ == "__main__":
    unittest.main()
