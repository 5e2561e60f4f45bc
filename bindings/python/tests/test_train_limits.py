"""hpu.train with Lightning's run limits and the optimizer/scheduler keys of issue 24:
fast_dev_run, max_time, min_epochs, num_sanity_val_steps, enable_model_summary,
optimizer.no_weight_decay and scheduler "plateau"."""
import os
import shutil
import tempfile
import unittest

import hpu
from test_train import tiny_job


class TrainLimits(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="hpu-python-train-limits-")

    def tearDown(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def test_fast_dev_run_runs_one_batch_and_writes_nothing(self):
        job = tiny_job(self.root, fast_dev_run=True, max_epochs=3, logger=True, enable_model_summary=False)
        result = hpu.train(job)
        self.assertEqual(result["global_step"], 1)
        self.assertIsNone(result["best_model_path"])
        self.assertIn("test_acc", result["test"])
        self.assertEqual(os.listdir(self.root), [])

    def test_max_time_waits_for_min_epochs(self):
        # max_time has passed after the first batch; min_epochs keeps two whole epochs of 4.
        job = tiny_job(self.root, max_time="00:00:00:00", min_epochs=2, max_epochs=3, enable_checkpointing=False,
                       num_sanity_val_steps=0, enable_model_summary=False)
        self.assertEqual(hpu.train(job)["global_step"], 8)

    def test_no_weight_decay_and_plateau_are_job_keys(self):
        job = tiny_job(self.root, enable_checkpointing=False, max_epochs=2, enable_model_summary=False)
        job["optimizer"] = {"name": "adamw", "lr": 0.01, "weight_decay": 0.1, "no_weight_decay": ["bias"]}
        job["scheduler"] = {"name": "plateau", "monitor": "val_loss", "patience": 0, "factor": 0.5}
        self.assertEqual(hpu.train(job)["global_step"], 8)


if __name__ == "__main__":
    unittest.main()
