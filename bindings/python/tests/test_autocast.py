"""Autocast regions (context manager and decorator), their per-thread state, and op lists."""
import os
import tempfile
import threading
import unittest

import hpu
from hpu import _lib
from support import run_python


class Regions(unittest.TestCase):
    def test_outside_any_region(self):
        self.assertFalse(hpu.is_autocast_enabled())
        self.assertIs(hpu.get_autocast_dtype(), hpu.bfloat16)
        self.assertIs(hpu.autocast_op_dtype("mm", hpu.float32), hpu.float32)

    def test_context_manager_nests(self):
        with hpu.autocast(dtype=hpu.bfloat16):
            self.assertTrue(hpu.is_autocast_enabled())
            self.assertIs(hpu.autocast_op_dtype("mm", hpu.float32), hpu.bfloat16)
            with hpu.autocast(enabled=False):
                self.assertFalse(hpu.is_autocast_enabled())
                self.assertIs(hpu.autocast_op_dtype("mm", hpu.float32), hpu.float32)
            with hpu.autocast("hpu", dtype=hpu.float16):
                self.assertIs(hpu.get_autocast_dtype(), hpu.float16)
                self.assertIs(hpu.autocast_op_dtype("linear", hpu.float32), hpu.float16)
            self.assertIs(hpu.get_autocast_dtype(), hpu.bfloat16)
        self.assertFalse(hpu.is_autocast_enabled())

    def test_op_lists_decide(self):
        with hpu.autocast():
            self.assertIs(hpu.autocast_op_dtype("mm", hpu.float32), hpu.bfloat16)        # lower precision
            self.assertIs(hpu.autocast_op_dtype("tan", hpu.bfloat16), hpu.float32)       # fp32
            self.assertIs(hpu.autocast_op_dtype("add", hpu.bfloat16, hpu.float32), hpu.float32)  # promote
            self.assertIs(hpu.autocast_op_dtype("relu", hpu.float32), hpu.float32)       # none: as given
            self.assertIs(hpu.autocast_op_dtype("mm", hpu.int32), hpu.int32)             # never cast

    def test_decorator(self):
        @hpu.autocast(dtype="bfloat16")
        def inside():
            return hpu.is_autocast_enabled(), hpu.autocast_op_dtype("mm", hpu.float32)

        self.assertEqual(inside(), (True, hpu.bfloat16))
        self.assertEqual(inside.__name__, "inside")
        self.assertFalse(hpu.is_autocast_enabled())

    def test_left_on_exceptions(self):
        with self.assertRaises(ZeroDivisionError):
            with hpu.autocast():
                1 / 0
        self.assertFalse(hpu.is_autocast_enabled())

    def test_per_thread(self):
        seen = []
        with hpu.autocast():
            t = threading.Thread(target=lambda: seen.append(hpu.is_autocast_enabled()))
            t.start()
            t.join()
            self.assertTrue(hpu.is_autocast_enabled())
        self.assertEqual(seen, [False])

    def test_bad_arguments(self):
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.autocast(dtype=hpu.float32)
        self.assertIn("hpu.float32", cm.exception.message)
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.autocast("cuda")
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.autocast(dtype="float8")
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.autocast_op_dtype("mm")

    def test_library_checks(self):
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            _lib.hpuAutocastPush(1, hpu.float32.value)
        self.assertIn("hpuAutocastPush", cm.exception.message)
        with self.assertRaises(hpu.InvalidUsageError) as cm:
            _lib.hpuAutocastPop()
        self.assertIn("hpuAutocastPop", cm.exception.message)


class OpLists(unittest.TestCase):
    def test_defaults(self):
        self.assertEqual(hpu.AUTOCAST_LISTS, ("lower_precision", "fp32", "promote"))
        self.assertEqual(len(hpu.get_autocast_op_list("lower_precision")), 27)
        self.assertEqual(len(hpu.get_autocast_op_list("fp32")), 49)
        self.assertEqual(hpu.get_autocast_op_list("promote"),
                         sorted(["add", "addcmul", "addcdiv", "cat", "div", "exp", "mul", "pow", "sub", "iadd",
                                 "truediv", "stack"]))
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.get_autocast_op_list("lower")

    def test_override_from_python(self):
        saved = hpu.get_autocast_op_list("lower_precision")
        try:
            hpu.set_autocast_op_list("lower_precision", ["tan", "relu"])
            self.assertEqual(hpu.get_autocast_op_list("lower_precision"), ["relu", "tan"])
            with hpu.autocast():
                self.assertIs(hpu.autocast_op_dtype("tan", hpu.float32), hpu.bfloat16)  # lower beats fp32
                self.assertIs(hpu.autocast_op_dtype("mm", hpu.float32), hpu.float32)    # no longer listed
            hpu.set_autocast_op_list("lower_precision", [])
            self.assertEqual(hpu.get_autocast_op_list("lower_precision"), [])
        finally:
            hpu.set_autocast_op_list("lower_precision", saved)
        self.assertEqual(hpu.get_autocast_op_list("lower_precision"), saved)

    def test_override_from_habana_variables(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("# my list\n  tan  \nmm\n")
        try:
            r = run_python("import hpu\n"
                           "print(hpu.get_autocast_op_list('lower_precision'))\n"
                           "with hpu.autocast():\n"
                           "    print(hpu.autocast_op_dtype('tan', hpu.float32), hpu.autocast_op_dtype('linear', hpu.float32))",
                           env={"PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST": f.name})
        finally:
            os.unlink(f.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split("\n")[:2], ["['mm', 'tan']", "hpu.bfloat16 hpu.float32"])

    def test_unreadable_list_file(self):
        r = run_python("import hpu\ntry:\n    hpu.device_count()\nexcept hpu.ConfigError as e:\n    print(e.message)",
                       env={"PT_HPU_AUTOCAST_FP32_OPS_LIST": "/nonexistent/fp32.txt"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("/nonexistent/fp32.txt", r.stdout)


if __name__ == "__main__":
    unittest.main()
