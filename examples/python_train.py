#!/usr/bin/env python3
"""Training from Python: an hpu-train job run in-process with hpu.train, its log lines
routed into Python's logging.

Run: HPU_LIBRARY=build/libhpu.so.0 HPU_TRAINER_LIBRARY=build/trainer/libhpu-trainer.so.0 \\
     PYTHONPATH=bindings/python python3 examples/python_train.py [BATCHES]
(from the build tree's copy, PYTHONPATH=build/python needs neither variable.)
"""
import logging
import sys
import tempfile

import hpu

batches = int(sys.argv[1]) if len(sys.argv) > 1 else 20
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
hpu.log_to_logging()       # libhpu's and the trainer's lines become records of "hpu.<component>"
hpu.set_log_level("info")  # libhpu drops lines below its own level first

job = {
    "model": {"layers": [{"type": "flatten"},
                         {"type": "linear", "in_features": 784, "out_features": 128},
                         {"type": "relu"},
                         {"type": "linear", "in_features": 128, "out_features": 10}]},
    "data": {"batch_size": 64, "val_size": 1000},
    "optimizer": {"name": "adamw", "lr": 0.002},
    "trainer": {"devices": 2, "strategy": "hpu_ddp", "precision": "bf16-mixed", "max_epochs": 1, "seed": 42,
                "limit_train_batches": batches, "limit_val_batches": 4, "limit_test_batches": 8,
                "enable_progress_bar": False, "logger": False,
                "default_root_dir": tempfile.mkdtemp(prefix="hpu-train-example-")},
}
result = hpu.train(job)  # Ctrl-C stops it before its next batch: KeyboardInterrupt, whole checkpoints only
print(f"trained {result['global_step']} steps on {result['world_size']} HPUs")
for name, value in sorted(result["metrics"].items()):
    print(f"  {name:12} {value:.4f}")
print(f"best checkpoint: {result['best_model_path']}")

# A mistake in the job is an hpu.HpuError naming the key and its value.
try:
    hpu.train({**job, "trainer": {**job["trainer"], "precision": "fp8"}})
except hpu.HpuError as e:
    print(f"caught {e.status_name}: {e.message}")
