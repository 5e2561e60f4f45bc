"""Statuses map to exception classes carrying the status name and libhpu's message."""
import builtins
import unittest

import hpu
from hpu import _lib
from support import run_python


class StatusTable(unittest.TestCase):
    def test_names_match_the_library(self):
        for status in hpu.Status:
            self.assertEqual(_lib.lib.hpuGetErrorName(status).decode(), status.c_name)

    def test_every_library_status_is_known(self):
        for n in range(256):
            name = _lib.lib.hpuGetErrorName(n).decode()
            if name != "HPU_STATUS_UNKNOWN":
                self.assertEqual(hpu.Status(n).c_name, name)

    def test_error_for_gives_the_subclass_of_each_status(self):
        from hpu.errors import error_for
        for status in hpu.Status:
            if status is hpu.Status.SUCCESS:
                continue
            e = error_for(status, "detail")
            self.assertIsInstance(e, hpu.HpuError)
            self.assertIs(e.status, status)
            self.assertEqual(e.status_name, status.c_name)
            self.assertEqual(e.message, "detail")
            self.assertEqual(str(e), f"{status.c_name}: detail")
            expected = "".join(w.capitalize() for w in status.name.split("_")) + "Error"
            self.assertEqual(type(e).__name__, expected)
            self.assertIs(getattr(hpu, expected), type(e))

    def test_unknown_status_is_a_plain_hpu_error(self):
        from hpu.errors import error_for
        e = error_for(1234, "odd")
        self.assertIs(type(e), hpu.HpuError)
        self.assertEqual(e.status, 1234)
        self.assertEqual(e.status_name, "HPU_STATUS_UNKNOWN")

    def test_pythonic_bases(self):
        self.assertTrue(issubclass(hpu.InvalidArgumentError, ValueError))
        self.assertTrue(issubclass(hpu.NotFoundError, LookupError))
        self.assertTrue(issubclass(hpu.TimeoutError, builtins.TimeoutError))
        self.assertTrue(issubclass(hpu.HpuError, RuntimeError))
        self.assertEqual(hpu.OutOfMemoryError.__module__, "hpu")


class FailingCalls(unittest.TestCase):
    def test_no_such_device(self):
        with self.assertRaises(hpu.NotFoundError) as cm:
            hpu.Device(hpu.device_count())
        e = cm.exception
        self.assertEqual(e.status_name, "HPU_ERROR_NOT_FOUND")
        self.assertIn("hpuDeviceOpen", e.message)
        self.assertIn(f"ordinal {hpu.device_count()}", e.message)
        with self.assertRaises(hpu.NotFoundError):
            hpu.Device(-1)

    def test_message_is_the_last_error_message(self):
        with self.assertRaises(hpu.HpuError) as cm:
            hpu.Device(1000)
        self.assertEqual(cm.exception.message, _lib.last_error_message())

    def test_invalid_argument_from_the_library(self):
        with hpu.mem_alloc(4096) as mem:
            with self.assertRaises(hpu.InvalidArgumentError) as cm:
                mem.fill(300)
            self.assertIn("hpuMemset", cm.exception.message)
            self.assertIn("300", cm.exception.message)

    def test_out_of_memory(self):
        limit = hpu.memory_stats(0)["Limit"]
        before = hpu.memory_stats(0)
        with self.assertRaises(hpu.OutOfMemoryError) as cm:
            hpu.mem_alloc(limit + 1, 0)
        self.assertIn("hpuMemAlloc", cm.exception.message)
        after = hpu.memory_stats(0)
        self.assertEqual(after["InUse"], before["InUse"])
        self.assertEqual(after["NumAllocs"], before["NumAllocs"])

    def test_closed_handles(self):
        s = hpu.Stream()
        s.close()
        s.close()  # idempotent
        with self.assertRaises(hpu.InvalidHandleError) as cm:
            s.synchronize()
        self.assertIn("hpuStreamSynchronize", cm.exception.message)
        e = hpu.Event()
        e.close()
        with self.assertRaises(hpu.InvalidHandleError):
            e.record()

    def test_raw_call_with_a_null_out_pointer(self):
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            _lib.hpuDeviceCount(None)
        self.assertIn("count is NULL", cm.exception.message)

    def test_config_error_names_the_variable(self):
        r = run_python("import hpu\n"
                       "try:\n    hpu.device_count()\n"
                       "except hpu.ConfigError as e:\n    print(e.status_name, '|', e.message)\n",
                       env={"HPU_NUM_DEVICES": "banana"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("HPU_ERROR_CONFIG |", r.stdout)
        self.assertIn("HPU_NUM_DEVICES", r.stdout)
        self.assertIn("banana", r.stdout)


class CheckedBeforeTheCall(unittest.TestCase):
    def test_device_arguments(self):
        with self.assertRaises(TypeError):
            hpu.memory_stats(1.5)
        with self.assertRaises(TypeError):
            hpu.memory_stats(True)
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.memory_stats("cuda:0")
        self.assertIn("'cuda:0'", cm.exception.message)

    def test_freed_memory(self):
        mem = hpu.mem_alloc(1024)
        mem.free()
        mem.free()  # idempotent
        with self.assertRaises(hpu.InvalidHandleError) as cm:
            mem.copy_from_host(b"x")
        self.assertIn("freed", cm.exception.message)

    def test_ranges(self):
        with hpu.mem_alloc(100) as mem:
            with self.assertRaises(hpu.InvalidArgumentError) as cm:
                mem.copy_from_host(bytes(101))
            self.assertIn("101 bytes at offset 0", cm.exception.message)
            with self.assertRaises(hpu.InvalidArgumentError):
                mem.copy_to_host(bytearray(10), offset=95)
            with self.assertRaises(hpu.InvalidArgumentError):
                mem.fill(0, nbytes=10, offset=-1)
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.mem_alloc(-1)


if __name__ == "__main__":
    unittest.main()
