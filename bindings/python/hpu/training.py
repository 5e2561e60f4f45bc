"""hpu.train: an hpu-train job run in this process, through libhpu-trainer's C entry
point ``hpuTrainerRunJob``."""
from __future__ import annotations

import ctypes
import json
import os
import threading
from types import SimpleNamespace
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from . import _lib
from .diagnostics import log_write
from .errors import HpuError, InvalidUsageError, Status, error_for

__all__ = ["train", "trainer_library_path"]

JobLike = Union[Mapping[str, Any], str, "os.PathLike[str]"]

TRAINER_SONAME = f"libhpu-trainer.so.{_lib.ABI_MAJOR}"
_trainer: Optional[Tuple[SimpleNamespace, str]] = None
_trainer_lock = threading.Lock()


def _load_trainer() -> Tuple[SimpleNamespace, str]:
    """libhpu-trainer's functions, declared from the generated prototypes, and its path."""
    global _trainer
    with _trainer_lock:
        if _trainer is None:
            try:
                lib, path = _lib.find(TRAINER_SONAME, "HPU_TRAINER_LIBRARY", "TRAINER_LIBRARY", beside=_lib.path)
            except ImportError as e:
                raise error_for(Status.NOT_AVAILABLE, f"hpu.train: {e}") from None
            _trainer = (SimpleNamespace(**_lib.declare(lib, "hpu-trainer", f"libhpu-trainer ({path})")), path)
            log_write("debug", f"hpu.train: libhpu-trainer {path}")
        return _trainer


def trainer_library_path() -> str:
    """The path (or name) of the libhpu-trainer that :func:`train` uses; loads it."""
    return _load_trainer()[1]


def _job_text(config: JobLike) -> Tuple[str, str]:
    """(JSON text, the name errors give it) of a job given as a dict, JSON text or a path."""
    if isinstance(config, Mapping):
        return json.dumps(config), "<config>"
    if isinstance(config, str) and config.lstrip().startswith("{"):
        return config, "<config>"
    if isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        try:
            with open(path, encoding="utf-8") as f:
                return f.read(), path
        except FileNotFoundError as e:
            raise error_for(Status.NOT_FOUND, f"hpu.train: job file {path}: {e.strerror}") from None
        except OSError as e:
            raise error_for(Status.IO, f"hpu.train: job file {path}: {e.strerror}") from None
    raise TypeError(f"hpu.train: config is a {type(config).__name__}; expected a dict, JSON text or a path")


def train(config: JobLike) -> Dict[str, Any]:
    """Runs an ``hpu-train`` job in this process and returns what it ended with.

    `config` is the job document ``hpu-train`` reads (``model``, ``data``, ``optimizer``,
    ``scheduler``, ``trainer``, ``ckpt_path``, ``test``; see ``man hpu-train``): a dict,
    its JSON text, or the path of a JSON file. The job fits, then runs the test set unless
    ``"test": False``; loggers, checkpoints and the profiler write their files as they do
    for ``hpu-train``, and the progress bar and the model summary print to stderr unless
    ``trainer.enable_progress_bar`` / ``trainer.enable_model_summary`` is false
    (``trainer.fast_dev_run`` runs a batch of each loop and writes nothing). Under a launcher (hpu_ddp over several
    processes) every process calls it with the same job. It blocks until the job ends
    (other Python threads keep running); one job runs at a time in a process.

    Ctrl-C (:class:`KeyboardInterrupt`, or any exception a signal handler raises) stops
    the job before its next batch through ``hpuTrainerCancelJob``: the step in progress
    ends, a checkpoint being written is finished, so only whole checkpoint files remain,
    and the exception is raised once the job has stopped, chained to the job's
    :class:`hpu.AbortedError`.

    Returns a dict::

        {"metrics": {"train_loss": ..., "val_acc": ..., "test_acc": ..., ...},  # all, at the end
         "test": {"test_acc": ..., "test_loss": ...},   # the test set's ({} when skipped)
         "epoch": 1, "global_step": 20, "global_rank": 0, "world_size": 1,
         "log_dir": "lightning_logs/version_0", "best_model_path": "...ckpt" or None}

    A metric that is not finite is None.

    Raises :class:`hpu.HpuError` with libhpu's message: :class:`hpu.ConfigError` for a bad
    job (naming the key and its line), :class:`hpu.InvalidArgumentError` for an option this
    machine cannot satisfy, :class:`hpu.NotFoundError` for a missing job, data set or
    checkpoint file, :class:`hpu.NotAvailableError` when libhpu-trainer cannot be found,
    :class:`hpu.InvalidUsageError` while another job runs in this process;
    :class:`TypeError` when `config` is none of the accepted kinds.

    >>> job = json.load(open("examples/fashion_mnist.json"))
    >>> job["trainer"].update(devices=1, max_epochs=1, limit_train_batches=10, enable_progress_bar=False)
    >>> hpu.train(job)["metrics"]["test_acc"]
    0.61...
    """
    text, name = _job_text(config)
    lib = _load_trainer()[0]
    out = ctypes.c_void_p()
    failure: List[BaseException] = []
    done = threading.Event()

    def run() -> None:  # the job runs on a worker thread, so the main thread can take signals
        try:
            lib.hpuTrainerRunJob(text.encode("utf-8"), name.encode("utf-8"), ctypes.byref(out))
        except BaseException as e:  # raised again on the caller's thread
            failure.append(e)
        finally:
            done.set()

    threading.Thread(target=run, name="hpu.train").start()
    interrupt = _wait(done, lib)
    try:
        if failure and isinstance(failure[0], HpuError):  # the job's thread's last error, made this thread's
            _lib.hpuSetLastErrorMessage(failure[0].message.encode("utf-8", "replace"))
        if interrupt is not None:
            raise interrupt from (failure[0] if failure else None)
        if failure:
            raise failure[0]
        return json.loads(ctypes.string_at(out.value).decode("utf-8"))
    finally:
        if out.value:
            _lib.hpuFree(out)


def _wait(done: threading.Event, lib: SimpleNamespace) -> Optional[BaseException]:
    """Waits until the job's thread is done; an exception raised meanwhile (KeyboardInterrupt
    from Ctrl-C: signal handlers run on this thread between the short waits) cancels the
    job and is returned once the job has stopped. (Not Thread.join: Python 3.11 takes a
    thread for ended when an exception interrupts its join.)"""
    interrupt: Optional[BaseException] = None
    while True:
        try:
            if interrupt is not None:
                try:
                    lib.hpuTrainerCancelJob()
                except InvalidUsageError:
                    pass  # until the job has started (or once it has returned): ask again
            if done.wait(0.05):
                return interrupt
        except BaseException as e:  # a signal handler's exception: stop the job, then raise it
            if interrupt is None:
                interrupt = e
