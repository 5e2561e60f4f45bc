"""Log level and profiler."""
import json
import os
import tempfile
import unittest

import hpu
from support import run_python


class LogLevel(unittest.TestCase):
    def test_set_and_get(self):
        saved = hpu.get_log_level()
        try:
            for level in hpu.LOG_LEVELS:
                hpu.set_log_level(level)
                self.assertEqual(hpu.get_log_level(), level)
        finally:
            hpu.set_log_level(saved)
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.set_log_level("loud")


class LogCallback(unittest.TestCase):
    def test_lines_reach_python(self):
        lines = []
        saved = hpu.get_log_level()
        hpu.set_log_level("debug")
        try:
            hpu.set_log_callback(lambda level, line: lines.append((level, line)))
            with self.assertRaises(hpu.NotFoundError):
                hpu.Device(77)
            hpu.set_log_callback(None)
            count = len(lines)
            with self.assertRaises(hpu.NotFoundError):
                hpu.Device(78)
        finally:
            hpu.set_log_callback(None)
            hpu.set_log_level(saved)
        self.assertTrue(any("ordinal 77" in line for _, line in lines), lines)
        self.assertTrue(all(level in hpu.LOG_LEVELS for level, _ in lines))
        self.assertEqual(len(lines), count)  # nothing after the callback was removed

    def test_exceptions_in_the_callback_are_dropped(self):
        def boom(level, line):
            raise RuntimeError("not into libhpu")
        saved = hpu.get_log_level()
        hpu.set_log_level("debug")
        try:
            hpu.set_log_callback(boom)
            with self.assertRaises(hpu.NotFoundError):
                hpu.Device(79)
        finally:
            hpu.set_log_callback(None)
            hpu.set_log_level(saved)


    def test_process_exits_cleanly_with_a_callback_set(self):
        r = run_python("import hpu\nhpu.set_log_level('trace')\n"
                       "hpu.set_log_callback(lambda level, line: print(level, line))\n"
                       "s = hpu.Stream(); m = hpu.mem_alloc(1 << 20); m.fill(1, stream=s)\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("debug ", r.stdout)


class Profiler(unittest.TestCase):
    def test_trace_and_summary(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.json")
            with hpu.profile(path):
                with hpu.mem_alloc(1 << 20) as mem:
                    mem.fill(3)
                    mem.copy_to_host()
            with open(path) as f:
                trace = json.load(f)
            events = trace["traceEvents"] if isinstance(trace, dict) else trace
            self.assertTrue(any("hpuMemset" in json.dumps(e) for e in events))
        self.assertIsInstance(hpu.profiler_summary(), str)

    def test_start_and_stop(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.json")
            hpu.profiler_start(path)
            try:
                hpu.ones(8).sum().item()
            finally:
                hpu.profiler_stop()
            with open(path) as f:
                self.assertIn("hpuSum", f.read())

    def test_stop_without_start(self):
        with self.assertRaises(hpu.HpuError) as cm:
            hpu.profiler_stop()
        self.assertIn("hpuProfilerStop", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
