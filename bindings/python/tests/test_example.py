"""examples/python_quickstart.py and python_train.py run and show what they promise."""
import os
import unittest

from support import PACKAGE_ROOT, run_python

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(PACKAGE_ROOT)), "examples")
EXAMPLE = os.path.join(EXAMPLES, "python_quickstart.py")


class Example(unittest.TestCase):
    def test_quickstart(self):
        with open(EXAMPLE) as f:
            r = run_python(f.read())
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        self.assertRegex(out, r"libhpu \d+\.\d+\.\d+: 8 devices")
        self.assertIn("  InUse              1048576", out)
        self.assertIn("after reset_peak_memory_stats: MaxInUse=0", out)
        self.assertIn("caught HPU_ERROR_OUT_OF_MEMORY: hpuMemAlloc:", out)
        self.assertIn("x.T[1] = [2.0, 5.0]", out)
        self.assertIn("as bfloat16: 803f004040408040a040c040 (raw bits)", out)
        self.assertIn("all_reduce(avg) over 4 ranks: [2.5, 2.5, 2.5, 2.5]", out)
        self.assertIn("relu(x @ w) under autocast: [[7.5, 2.5], [18.0, 3.25]] (hpu.bfloat16)", out)

    def test_train(self):
        path = os.path.join(EXAMPLES, "python_train.py")
        r = run_python(f"import runpy, sys; sys.argv = [{path!r}, '6']; runpy.run_path({path!r}, run_name='__main__')",
                       timeout=180)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("trained 6 steps on 2 HPUs", r.stdout)
        self.assertRegex(r.stdout, r"  test_acc +0\.\d{4}")
        self.assertIn("caught HPU_ERROR_", r.stdout)
        self.assertIn("trainer.precision", r.stdout)
        self.assertIn("INFO hpu.trainer: job: 2 device(s) per process, world size 2", r.stderr)


if __name__ == "__main__":
    unittest.main()
