"""hpu.train runs an hpu-train job in-process through libhpu-trainer and returns its metrics."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import hpu
from support import PACKAGE_ROOT


def tiny_job(root: str, **trainer) -> dict:
    """A few batches of Fashion-MNIST through a small MLP on one device."""
    return {
        "model": {"layers": [{"type": "flatten"},
                             {"type": "linear", "in_features": 784, "out_features": 16},
                             {"type": "relu"},
                             {"type": "linear", "in_features": 16, "out_features": 10}]},
        "data": {"batch_size": 32, "val_size": 64},
        "optimizer": {"name": "sgd", "lr": 0.05},
        "trainer": {"devices": 1, "max_epochs": 1, "seed": 7, "limit_train_batches": 4, "limit_val_batches": 2,
                    "limit_test_batches": 2, "log_every_n_steps": 1, "enable_progress_bar": False, "logger": False,
                    "default_root_dir": root, **trainer},
    }


class Train(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="hpu-python-train-")

    def tearDown(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def test_metrics_come_back(self):
        result = hpu.train(tiny_job(self.root))
        self.assertEqual(result["global_step"], 4)
        self.assertEqual(result["epoch"], 1)
        self.assertEqual((result["global_rank"], result["world_size"]), (0, 1))
        self.assertEqual(sorted(result["test"]), ["test_acc", "test_loss"])
        for key in ("train_loss", "val_loss", "val_acc", "test_loss", "test_acc"):
            self.assertIsInstance(result["metrics"][key], float, key)
        self.assertEqual(result["metrics"]["test_acc"], result["test"]["test_acc"])
        self.assertTrue(0.0 <= result["test"]["test_acc"] <= 1.0)
        self.assertGreater(result["test"]["test_loss"], 0.0)
        # ModelCheckpoint is on by default and writes under default_root_dir.
        self.assertTrue(result["best_model_path"].startswith(self.root), result["best_model_path"])
        self.assertTrue(os.path.exists(result["best_model_path"]))

    def test_same_seed_same_metrics_from_json_text_and_from_a_file(self):
        job = tiny_job(self.root, enable_checkpointing=False)
        job["test"] = False
        first = hpu.train(job)
        self.assertEqual(first["test"], {})
        self.assertIsNone(first["best_model_path"])
        second = hpu.train(json.dumps(job))
        path = os.path.join(self.root, "job.json")
        with open(path, "w") as f:
            json.dump(job, f)
        third = hpu.train(path)
        import pathlib
        fourth = hpu.train(pathlib.Path(path))
        self.assertEqual(first["metrics"], second["metrics"])
        self.assertEqual(first["metrics"], third["metrics"])
        self.assertEqual(first["metrics"], fourth["metrics"])

    def test_bad_config_raises_with_the_message(self):
        job = tiny_job(self.root)
        job["trainer"]["max_epochs"] = "two"
        with self.assertRaises(hpu.ConfigError) as cm:
            hpu.train(job)
        e = cm.exception
        self.assertEqual(e.status_name, "HPU_ERROR_CONFIG")
        self.assertTrue(e.message.startswith("hpuTrainerRunJob: "), e.message)
        self.assertIn("trainer.max_epochs", e.message)
        self.assertEqual(e.message, hpu._lib.last_error_message())

    def test_unknown_key_in_a_file_names_the_file_and_line(self):
        path = os.path.join(self.root, "bad.json")
        with open(path, "w") as f:
            f.write('{\n  "model": {"layers": [{"type": "relu"}]},\n  "trainer": {"max_epoch": 1}\n}\n')
        with self.assertRaises(hpu.ConfigError) as cm:
            hpu.train(path)
        self.assertIn(f"{path}:3", cm.exception.message)
        self.assertIn("max_epoch", cm.exception.message)

    def test_syntax_error(self):
        with self.assertRaises(hpu.ConfigError) as cm:
            hpu.train('{"trainer": ')
        self.assertIn("<config>", cm.exception.message)

    def test_more_devices_than_visible(self):
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.train(tiny_job(self.root, devices=hpu.device_count() + 1))
        self.assertIn("devices", cm.exception.message)
        self.assertIn(str(hpu.device_count() + 1), cm.exception.message)

    def test_missing_data_set(self):
        job = tiny_job(self.root)
        job["data"]["root"] = os.path.join(self.root, "no-such-dir")
        with self.assertRaises(hpu.HpuError) as cm:
            hpu.train(job)
        self.assertIn("no-such-dir", cm.exception.message)

    def test_missing_job_file_and_wrong_type(self):
        with self.assertRaises(hpu.NotFoundError) as cm:
            hpu.train(os.path.join(self.root, "absent.json"))
        self.assertIn("absent.json", cm.exception.message)
        with self.assertRaises(TypeError):
            hpu.train(42)

    def test_ctrl_c_stops_the_job_cleanly(self):
        # 1000 steps with a checkpoint after each: far longer than the test waits.
        job = tiny_job(self.root, limit_train_batches=1000, callbacks=[
            {"type": "ModelCheckpoint", "every_n_train_steps": 1, "save_top_k": -1, "save_last": True}])
        job["test"] = False
        code = ("import sys, hpu\n"
                "try:\n"
                f"    hpu.train({json.dumps(job)!r})\n"
                "except KeyboardInterrupt as e:\n"
                "    print('KeyboardInterrupt', type(e.__cause__).__name__, e.__cause__.message, flush=True)\n"
                "    sys.exit(3)\n"
                "print('the job ran to its end')\n")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (PACKAGE_ROOT, os.environ.get("PYTHONPATH")))))
        child = subprocess.Popen(["/usr/bin/python3", "-c", code], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        ckpts = os.path.join(self.root, "checkpoints")
        try:
            self.assertTrue(_wait_for_files(ckpts, 2, lambda: child.poll() is None), "no checkpoint within 60 s")
            self.assertIsNone(child.poll(), "the job ended before the test interrupted it")
            child.send_signal(signal.SIGINT)
            sent = time.monotonic()
            out, err = child.communicate(timeout=30)
            stop_s = time.monotonic() - sent
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate()
        self.assertEqual(child.returncode, 3, f"stdout: {out}\nstderr: {err}")
        self.assertLess(stop_s, 10.0)  # a step or so; the margin is for a loaded machine
        self.assertRegex(out, r"^KeyboardInterrupt AbortedError hpuTrainerRunJob: cancelled by hpuTrainerCancelJob "
                              r"before training batch \d+ \(epoch 0, global step \d+\)$")
        # Only whole checkpoints: no temporary file is left, and the newest resumes.
        files = sorted(os.listdir(ckpts))
        for f in files:
            self.assertRegex(f, r"^(last|epoch=0-step=\d+)\.ckpt$")
        stopped_at = int(re.search(r"global step (\d+)", out).group(1))
        self.assertIn(f"epoch=0-step={stopped_at}.ckpt", files)
        resume = tiny_job(self.root, limit_train_batches=1000, max_steps=stopped_at, enable_checkpointing=False)
        resume.update(test=False, ckpt_path=os.path.join(ckpts, "last.ckpt"))
        self.assertEqual(hpu.train(resume)["global_step"], stopped_at)

    def test_one_job_at_a_time(self):
        job = tiny_job(self.root, limit_train_batches=1000, callbacks=[
            {"type": "ModelCheckpoint", "every_n_train_steps": 1, "save_top_k": -1}])
        job["test"] = False
        errors = []
        first = threading.Thread(target=lambda: errors.append(_raises(hpu.train, job)))
        first.start()
        ckpts = os.path.join(self.root, "checkpoints")
        try:
            self.assertTrue(_wait_for_files(ckpts, 1, first.is_alive), "no checkpoint within 60 s")
            self.assertTrue(first.is_alive(), errors)
            with self.assertRaises(hpu.InvalidUsageError) as cm:
                hpu.train(tiny_job(os.path.join(self.root, "second"), enable_checkpointing=False))
            self.assertEqual(cm.exception.message, "hpuTrainerRunJob: another job is running in this process; "
                                                   "one runs at a time")
            self.assertEqual(hpu._lib.last_error_message(), cm.exception.message)
        finally:
            while first.is_alive():  # stop the long job as Ctrl-C does
                hpu.training._load_trainer()[0].hpuTrainerCancelJob()
                first.join(0.05)
        self.assertIsInstance(errors[0], hpu.AbortedError)

    def test_trainer_library_is_found(self):
        self.assertIn("libhpu-trainer.so", hpu.trainer_library_path())


def _wait_for_files(folder, count, running, seconds=60):
    """Whether `folder` holds `count` files within `seconds`, while running() is true."""
    deadline = time.monotonic() + seconds
    while running() and time.monotonic() < deadline:
        if os.path.isdir(folder) and len(os.listdir(folder)) >= count:
            return True
        time.sleep(0.005)
    return os.path.isdir(folder) and len(os.listdir(folder)) >= count


def _raises(fn, *args):
    try:
        fn(*args)
    except BaseException as e:
        return e
    return None


if __name__ == "__main__":
    unittest.main()
