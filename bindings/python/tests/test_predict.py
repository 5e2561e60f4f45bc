"""hpu.predict (hpuTrainerPredict) and the job commands that test or predict with a checkpoint."""
import array
import csv
import gzip
import os
import shutil
import tempfile
import unittest

import hpu
from test_train import tiny_job as train_job

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def tiny_job(root: str, **top) -> dict:
    """test_train's job for three epochs; ModelCheckpoint keeps the epoch with the highest
    val_loss (the first), so "best" is not the final weights."""
    job = train_job(root, max_epochs=3, limit_predict_batches=2, log_every_n_steps=50,
                    callbacks=[{"type": "ModelCheckpoint", "monitor": "val_loss", "mode": "max"}])
    job.update(top)
    return job


def test_images(n: int) -> array.array:
    """The first n test images, normalised as the trainer's Fashion-MNIST module does
    (float32 arithmetic: x * (1 / (255 * std)) - mean / std)."""
    f32 = lambda v: array.array("f", [v])[0]  # noqa: E731
    mean, std = f32(0.2860), f32(0.3530)
    scale, shift = f32(1.0 / f32(255.0 * std)), f32(mean / std)
    with gzip.open(os.path.join(FASHION_MNIST, "t10k-images-idx3-ubyte.gz"), "rb") as f:
        data = f.read(16 + n * 784)[16:]
    return array.array("f", [f32(f32(p * scale) - shift) for p in data])


class Predict(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="hpu-python-predict-")
        job = tiny_job(cls.root)
        job["test"] = False
        cls.fit = hpu.train(job)
        cls.best = cls.fit["best_model_path"]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def test_predict_gives_the_rows_hpu_train_predict_writes(self):
        output = os.path.join(self.root, "out", "p.csv")
        result = hpu.train(tiny_job(self.root, command="predict", ckpt_path=self.best, predict={"output": output}))
        self.assertEqual(result["command"], "predict")
        self.assertEqual(result["predict"]["rows"], 64)
        with open(output, newline="") as f:
            rows = list(csv.reader(f))
        columns = ["pred"] + [f"prob_{k}" for k in range(10)]
        self.assertEqual(rows[0], columns)
        self.assertEqual(len(rows), 1 + 64)

        got = hpu.predict(self.best, test_images(64), (64, 28, 28))
        self.assertEqual(got["columns"], columns)
        self.assertEqual(len(got["predictions"]), 64)
        for mine, theirs in zip(got["predictions"], rows[1:]):
            self.assertEqual(mine[0], int(theirs[0]))
            for a, b in zip(mine[1:], theirs[1:]):
                self.assertAlmostEqual(a, float(b), delta=1e-5)
            self.assertAlmostEqual(sum(mine[1:]), 1.0, delta=1e-5)
            self.assertEqual(mine[0], max(range(10), key=lambda k: mine[1 + k]))

    def test_any_float32_buffer_and_the_options(self):
        x = test_images(5)
        flat = hpu.predict(self.best, memoryview(x).cast("B"), (5, 784), batch_size=2)
        self.assertEqual(len(flat["predictions"]), 5)
        bf16 = hpu.predict(self.best, x, [5, 784], precision="bf16-mixed", device=0)
        self.assertEqual(bf16["columns"], flat["columns"])
        self.assertEqual(len(bf16["predictions"]), 5)

    def test_test_ckpt_path_best_tests_the_best_checkpoint(self):
        job = tiny_job(self.root, test_ckpt_path="best")
        best = hpu.train(job)
        again = hpu.train(tiny_job(self.root, command="test", ckpt_path=best["best_model_path"]))
        self.assertEqual(again["command"], "test")
        self.assertEqual(again["test"], best["test"])
        final = hpu.train(tiny_job(self.root))
        self.assertNotEqual(final["test"]["test_loss"], best["test"]["test_loss"])

    def test_bad_checkpoints_and_arguments(self):
        x = test_images(2)
        missing = os.path.join(self.root, "none.ckpt")
        with self.assertRaises(hpu.NotFoundError) as cm:
            hpu.predict(missing, x, (2, 784))
        self.assertIn(missing, cm.exception.message)
        self.assertTrue(cm.exception.message.startswith("hpuTrainerPredict: "), cm.exception.message)
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.predict(self.best, x, (3, 784))
        self.assertIn("x has 6272 bytes; shape (3, 784) of float32 needs 9408", cm.exception.message)
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.predict(self.best, x, (2, 784), precision="16-mixed")
        self.assertIn('options->precision is "16-mixed"', cm.exception.message)
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.predict(self.best, x, (1568,))
        self.assertIn("ndim is 1", cm.exception.message)
        with self.assertRaises(TypeError):
            hpu.predict(self.best, [0.0] * 784)
        with self.assertRaises(hpu.ConfigError) as cm:
            hpu.train(tiny_job(self.root, command="predict"))
        self.assertIn('the "predict" command needs ckpt_path', cm.exception.message)


if __name__ == "__main__":
    unittest.main()
