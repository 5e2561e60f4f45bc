"""The binding needs nothing outside the standard library: run the other suites with numpy blocked."""
import re
import unittest

from support import run_python

SUITES = ["test_errors", "test_device", "test_memory", "test_stream", "test_autocast", "test_diagnostics",
          "test_dtypes", "test_tensor", "test_comm", "test_dlpack"]  # test_ops needs numpy for its references

BLOCKED = """
import sys, unittest
sys.modules["numpy"] = None          # any 'import numpy' now raises ImportError
import hpu
result = unittest.main(module=None, argv=["no-numpy"] + {suites!r}, exit=False).result
assert sys.modules["numpy"] is None, "numpy was imported"
print("ran", result.testsRun, "ok" if result.wasSuccessful() else "FAILED")
"""


class WithoutNumpy(unittest.TestCase):
    def test_suites_pass_with_numpy_blocked(self):
        r = run_python(BLOCKED.format(suites=SUITES), timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        m = re.search(r"ran (\d+) ok", r.stdout)
        self.assertIsNotNone(m, r.stdout + r.stderr)
        self.assertGreater(int(m.group(1)), len(SUITES))

    def test_numpy_is_really_blocked(self):
        r = run_python('import sys; sys.modules["numpy"] = None\n'
                       "try:\n    import numpy\nexcept ImportError:\n    print('blocked')\n")
        self.assertEqual(r.stdout.strip(), "blocked")


if __name__ == "__main__":
    unittest.main()
