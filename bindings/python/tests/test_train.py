"""hpu.train runs an hpu-train job in-process through libhpu-trainer and returns its metrics."""
import json
import os
import shutil
import tempfile
import unittest

import hpu


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

    def test_trainer_library_is_found(self):
        self.assertIn("libhpu-trainer.so", hpu.trainer_library_path())


if __name__ == "__main__":
    unittest.main()
