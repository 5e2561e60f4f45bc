"""Log level and profiler."""
import json
import os
import tempfile
import unittest

import hpu


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

    def test_stop_without_start(self):
        with self.assertRaises(hpu.HpuError) as cm:
            hpu.profiler_stop()
        self.assertIn("hpuProfilerStop", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
