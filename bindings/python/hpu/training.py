"""hpu.train: an hpu-train job run in this process, through libhpu-trainer's C entry
point ``hpuTrainerRunJob``; hpu.predict: a checkpoint's model predicting samples in host
memory (``hpuTrainerPredict``)."""
from __future__ import annotations

import ctypes
import json
import os
import threading
from types import SimpleNamespace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _abi, _lib
from ._buffer import host_buffer
from .diagnostics import log_write
from .errors import HpuError, InvalidArgumentError, InvalidUsageError, Status, error_for

__all__ = ["predict", "train", "trainer_library_path"]

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
    ``scheduler``, ``trainer``, ``command``, ``ckpt_path``, ``test``, ``test_ckpt_path``,
    ``predict``; see ``man hpu-train``): a dict, its JSON text, or the path of a JSON file.
    The job fits, then runs the test set unless ``"test": False`` (with the final weights,
    or those ``test_ckpt_path`` names: ``"best"``, ``"last"`` or a checkpoint's path). A
    job whose ``command`` is ``"validate"``, ``"test"`` or ``"predict"`` runs that stage
    alone with the weights of its ``ckpt_path``; ``"predict"`` writes the test set's
    predictions to ``job["predict"]["output"]`` (``.csv``: a header, then a row per sample in
    order; ``.npy``: a float64 array of those rows, for ``numpy.load``). Loggers, checkpoints and the profiler write their files as they do
    for ``hpu-train``, and the progress bar and the model summary print to stderr unless
    ``trainer.enable_progress_bar`` / ``trainer.enable_model_summary`` is false
    (``trainer.fast_dev_run`` runs a batch of each loop and writes nothing). Under a launcher (hpu_ddp over several
    processes) every process calls it with the same job. It blocks until the job ends
    (other Python threads keep running); one job runs at a time in a process.

    The model section stacks ``linear``, ``relu``, ``gelu``, ``tanh``, ``dropout``,
    ``layernorm``, ``embedding``, ``flatten`` and ``residual`` layers (``{"type": "residual",
    "layers": [...]}`` gives x + layers(x)). Besides Fashion-MNIST, the data section reads
    arrays saved with ``numpy.save`` (``{"name": "npy", "train_features": "x.npy",
    "train_labels": "y.npy"}``, optional ``val_*``/``test_*`` pairs) or IDX files of any shape
    and element type (``"name": "idx"``), with ``normalize`` (``scale``, ``mean``, ``std``),
    ``flatten`` and ``num_classes``; ``man hpu-train`` describes every key.

    Ctrl-C (:class:`KeyboardInterrupt`, or any exception a signal handler raises) stops
    the job before its next batch through ``hpuTrainerCancelJob``: the step in progress
    ends, a checkpoint being written is finished, so only whole checkpoint files remain,
    and the exception is raised once the job has stopped, chained to the job's
    :class:`hpu.AbortedError`.

    Returns a dict::

        {"command": "fit",
         "metrics": {"train_loss": ..., "val_acc": ..., "test_acc": ..., ...},  # all, at the end
         "validate": {},                                 # command "validate": its metrics
         "test": {"test_acc": ..., "test_loss": ...},   # the test set's ({} when skipped)
         "predict": None,                                # command "predict": {"output", "rows", "columns"}
         "epoch": 1, "global_step": 20, "global_rank": 0, "world_size": 1,
         "log_dir": "lightning_logs/version_0", "best_model_path": "...ckpt" or None}

    A metric that is not finite is None.

    Raises :class:`hpu.HpuError` with libhpu's message: :class:`hpu.ConfigError` for a bad
    job (naming the key and its line), :class:`hpu.InvalidArgumentError` for an option this
    machine cannot satisfy, :class:`hpu.NotFoundError` for a missing job, data set or
    checkpoint file, :class:`hpu.IoError` for a data file that is not a readable .npy or IDX
    file (Fortran order, big-endian, another dtype, truncated) and
    :class:`hpu.InvalidArgumentError` for data files that do not fit together (float labels,
    features and labels of different lengths), :class:`hpu.NotAvailableError` when
    libhpu-trainer cannot be found,
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


def predict(ckpt_path: Union[str, "os.PathLike[str]"], x: Any, shape: Optional[Sequence[int]] = None, *,
            device: int = 0, batch_size: int = 0, precision: Optional[str] = None) -> Dict[str, Any]:
    """Lightning's ``load_from_checkpoint``, then ``predict``, without a trainer.

    Builds the model the checkpoint at `ckpt_path` describes (the hyperparameters that the
    checkpoints of ``hpu-train`` jobs and :func:`train` carry), loads its weights and runs
    its ``predict_step`` over the samples `x`: float32 values, C-contiguous, of `shape`
    (samples first, then each sample's dimensions; by default ``x.shape``, so a numpy
    array needs none), e.g. ``(n, 28, 28)`` or ``(n, 784)`` for Fashion-MNIST. `device`
    is this process's device to run on, `batch_size` the samples per forward pass (0: 256),
    `precision` ``"32-true"`` (None) or ``"bf16-mixed"``.

    Returns a row per sample, in order; for the classifier the class with the highest
    score, then the softmax of the scores (a value that is not finite is None)::

        {"columns": ["pred", "prob_0", ..., "prob_9"],
         "predictions": [[7, 0.026, ..., 0.122], ...]}

    These are the rows ``hpu-train predict`` writes for the same samples.

    Raises :class:`hpu.NotFoundError` for a missing file, :class:`hpu.IoError` for a file
    that is not a checkpoint,
    :class:`hpu.InvalidArgumentError` for a checkpoint that describes no model or whose
    weights do not fit it, and for a bad argument; :class:`TypeError` when `x` has no
    buffer or `shape` is missing and `x` has none.

    >>> hpu.predict("runs/checkpoints/epoch=0-step=430.ckpt", images)["predictions"][0][0]
    9
    """
    path = os.fspath(ckpt_path)
    if shape is None:
        shape = getattr(x, "shape", None)
        if shape is None:
            raise TypeError(f"hpu.predict: x is a {type(x).__name__} without a shape; give shape")
    dims = [int(d) for d in shape]
    dtype = getattr(x, "dtype", None)
    if dtype is not None and str(dtype) != "float32":
        raise InvalidArgumentError(f"hpu.predict: x holds {dtype}; expected float32")
    lib = _load_trainer()[0]
    opts = _lib.options(_abi.hpuTrainerPredictOptions_t, "hpuTrainerPredict", device=device,
                        batch_size=batch_size, precision=None if precision is None else precision.encode("utf-8"))
    out = ctypes.c_void_p()
    with host_buffer(x, name="x") as (addr, n):
        need = 4
        for d in dims:
            need *= max(d, 0)
        if n != need:
            raise InvalidArgumentError(f"hpu.predict: x has {n} bytes; shape {tuple(dims)} of float32 needs {need}")
        lib.hpuTrainerPredict(path.encode("utf-8"), ctypes.cast(addr, ctypes.POINTER(ctypes.c_float)), len(dims),
                              (ctypes.c_int64 * max(1, len(dims)))(*dims), ctypes.byref(opts), ctypes.byref(out))
    try:
        return json.loads(ctypes.string_at(out.value).decode("utf-8"))
    finally:
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
