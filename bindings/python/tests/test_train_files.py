"""hpu.train on data a Python user saves with numpy (.npy features and labels), through
a model section with residual blocks, layernorm, tanh and dropout."""
import os
import shutil
import tempfile
import unittest

import numpy as np

import hpu


def blobs(n: int, seed: int):
    """4 Gaussian blobs in 16 dimensions: float32 features [n, 16], int64 labels [n]."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, n)
    x = rng.normal(0, 0.7, (n, 16)).astype(np.float32)
    x += 1.5 * (np.arange(16)[None, :] % 4 == y[:, None])
    return x.astype(np.float32), y.astype(np.int64)


class TrainOnNpyFiles(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="hpu-python-npy-")
        for split, n, seed in (("train", 256, 1), ("test", 64, 2)):
            x, y = blobs(n, seed)
            np.save(os.path.join(self.root, f"{split}_x.npy"), x)
            np.save(os.path.join(self.root, f"{split}_y.npy"), y)

    def tearDown(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def job(self, layers=None, **data) -> dict:
        return {
            "model": {"layers": layers or [
                {"type": "linear", "in_features": 16, "out_features": 32},
                {"type": "residual", "layers": [{"type": "layernorm"},
                                                {"type": "linear", "in_features": 32, "out_features": 32},
                                                {"type": "tanh"}, {"type": "dropout", "p": 0.1}]},
                {"type": "linear", "in_features": 32, "out_features": 4}]},
            "data": {"name": "npy", "root": self.root, "batch_size": 32, "val_size": 64,
                     "train_features": "train_x.npy", "train_labels": "train_y.npy",
                     "test_features": "test_x.npy", "test_labels": "test_y.npy", **data},
            "optimizer": {"name": "adamw", "lr": 0.01},
            "trainer": {"devices": 1, "max_epochs": 3, "seed": 7, "enable_progress_bar": False, "logger": False,
                        "enable_checkpointing": False, "default_root_dir": self.root},
        }

    def test_learns_from_npy_files(self):
        result = hpu.train(self.job())
        self.assertEqual(result["global_step"], 3 * 6)
        self.assertGreater(result["test"]["test_acc"], 0.8)

    def test_model_that_does_not_fit_the_data_names_the_layer(self):
        with self.assertRaises(hpu.ConfigError) as e:
            hpu.train(self.job([{"type": "linear", "in_features": 20, "out_features": 4}]))
        self.assertIn("model.layers[0].in_features: 20, but the data's samples have 16 features", str(e.exception))
        with self.assertRaises(hpu.ConfigError) as e:
            hpu.train(self.job([{"type": "residual",
                                 "layers": [{"type": "linear", "in_features": 16, "out_features": 8}]},
                                {"type": "linear", "in_features": 16, "out_features": 4}]))
        self.assertIn("model.layers[0]: the residual block's layers end with 8 features, but its input has 16",
                      str(e.exception))

    def test_bad_files_name_the_file(self):
        np.save(os.path.join(self.root, "float_y.npy"), np.zeros(256, np.float32))
        with self.assertRaises(hpu.InvalidArgumentError) as e:
            hpu.train(self.job(train_labels="float_y.npy"))
        self.assertIn("float_y.npy: labels must be integers of shape [N]; found float32 of shape [256]",
                      str(e.exception))
        np.save(os.path.join(self.root, "fortran_x.npy"), np.asfortranarray(blobs(256, 1)[0]))
        with self.assertRaises(hpu.IoError) as e:
            hpu.train(self.job(train_features="fortran_x.npy"))
        self.assertIn("fortran_x.npy: the array is in Fortran order", str(e.exception))
        with self.assertRaises(hpu.NotFoundError) as e:
            hpu.train(self.job(train_features="missing.npy"))
        self.assertIn("missing.npy", str(e.exception))


if __name__ == "__main__":
    unittest.main()
