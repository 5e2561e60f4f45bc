"""libhpu's log lines, the trainer's and the binding's, reach Python's logging."""
import logging
import os
import shutil
import tempfile
import threading
import unittest

import hpu
from support import run_python
from test_train import tiny_job


class LogToLogging(unittest.TestCase):
    def setUp(self):
        self.saved_level = hpu.get_log_level()
        hpu.log_to_logging()

    def tearDown(self):
        hpu.set_log_callback(None)
        hpu.set_log_level(self.saved_level)

    def test_a_line_becomes_a_record_of_its_component(self):
        with self.assertLogs("hpu", level="DEBUG") as cm:
            hpu.log_write("warn", "disk almost full")
            hpu.log_write("error", "out of luck", component="myplugin")
        first, second = cm.records
        self.assertEqual((first.name, first.levelno, first.getMessage()), ("hpu.python", logging.WARNING,
                                                                         "disk almost full"))
        self.assertEqual(first.hpu_pid, os.getpid())
        self.assertEqual(first.hpu_component, "python")
        self.assertRegex(first.hpu_time, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
        self.assertEqual((second.name, second.levelno), ("hpu.myplugin", logging.ERROR))

    def test_the_library_level_filters_first(self):
        hpu.set_log_level("warn")
        with self.assertLogs("hpu", level="DEBUG") as cm:
            hpu.log_write("info", "dropped by libhpu")
            hpu.log_write("warn", "kept")
        self.assertEqual([r.getMessage() for r in cm.records], ["kept"])
        hpu.set_log_level("trace")
        with self.assertLogs("hpu", level=1) as cm:
            hpu.log_write("trace", "fine detail")
        self.assertEqual((cm.records[0].levelno, cm.records[0].getMessage()), (5, "fine detail"))

    def test_lines_from_other_threads(self):
        with self.assertLogs("hpu", level="WARNING") as cm:
            threads = [threading.Thread(target=hpu.log_write, args=("warn", f"thread {i}")) for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        self.assertEqual(sorted(r.getMessage() for r in cm.records), [f"thread {i}" for i in range(4)])

    def test_bad_level_and_component(self):
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.log_write("loud", "x")
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.log_write("warn", "x", component="has space")
        self.assertIn("component", cm.exception.message)


class TrainerLines(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="hpu-python-log-")
        self.saved_level = hpu.get_log_level()
        hpu.log_to_logging()

    def tearDown(self):
        hpu.set_log_callback(None)
        hpu.set_log_level(self.saved_level)
        shutil.rmtree(self.root, ignore_errors=True)

    def trainer_records(self, job):
        with self.assertLogs("hpu", level=1) as cm:
            hpu.log_write("warn", "marker")  # assertLogs needs at least one record
            hpu.train(job)
        return [r for r in cm.records if r.name == "hpu.trainer"]

    def test_warnings_pass_the_default_level_info_does_not(self):
        hpu.set_log_level("warn")
        # ModelCheckpoint monitoring val_acc, stopped by max_steps before any validation.
        job = tiny_job(self.root, max_steps=2, callbacks=[{"type": "ModelCheckpoint", "monitor": "val_acc"}])
        records = self.trainer_records(job)
        self.assertEqual([r.levelno for r in records], [logging.WARNING])
        self.assertIn('ModelCheckpoint(monitor="val_acc") skipped a save', records[0].getMessage())
        self.assertEqual(records[0].hpu_component, "trainer")

    def test_info_lines_at_level_info(self):
        hpu.set_log_level("info")
        records = self.trainer_records(tiny_job(self.root))
        messages = [r.getMessage() for r in records]
        self.assertTrue(any(m.startswith("job: 1 device(s) per process, world size 1") for m in messages), messages)
        self.assertTrue(any(m.startswith("ModelCheckpoint saved ") for m in messages), messages)


class Environment(unittest.TestCase):
    def test_hpu_log_level_filters_the_trainer_lines(self):
        code = (
            "import logging, tempfile, hpu\n"
            "from test_train import tiny_job\n"
            "seen = []\n"
            "hpu.set_log_callback(lambda level, line: seen.append(line) if ' trainer: ' in line else None)\n"
            "hpu.train(tiny_job(tempfile.mkdtemp()))\n"
            "print(len(seen))\n")
        quiet = run_python(code, env={"HPU_LOG_LEVEL": "error"}, timeout=120)
        self.assertEqual(quiet.returncode, 0, quiet.stderr)
        self.assertEqual(quiet.stdout.strip(), "0")
        chatty = run_python(code, env={"HPU_LOG_LEVEL": "info"}, timeout=120)
        self.assertEqual(chatty.returncode, 0, chatty.stderr)
        self.assertGreaterEqual(int(chatty.stdout.strip()), 2)


if __name__ == "__main__":
    unittest.main()
