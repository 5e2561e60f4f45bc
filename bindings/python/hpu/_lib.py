"""Finds libhpu, loads it with ctypes and declares the C functions.

The library is looked for, in order:

1. the file named by ``HPU_LIBRARY`` (when set, nothing else is tried);
2. ``libhpu.so.0`` next to the package (a copy bundled with it);
3. the location written into ``_location.py`` by the build tree or by
   ``cmake --install``;
4. ``libhpu.so.0`` on the system library path (``LD_LIBRARY_PATH``, ``ldconfig``).

libhpu-trainer (for :func:`hpu.train`) is looked for the same way when first
needed: ``HPU_TRAINER_LIBRARY``, next to the package, ``_location.py``, then
next to the libhpu that was loaded, then ``libhpu-trainer.so.0`` on the system
library path.

The functions are declared from ``_abi.FUNCTIONS``, which tools/abi/gen_bindings.py
generates from the C headers; each is a module attribute (``_lib.hpuMemAlloc``).
Every function that returns ``hpuStatus_t`` raises the matching
:class:`~hpu.errors.HpuError` on failure, so callers just call it.
"""
from __future__ import annotations

import ctypes
import os
import re
from typing import Callable, Dict

from . import _abi
from ._abi import Handle, Status  # noqa: F401  (Handle: the type of opaque handles, for the modules)
from .errors import error_for

ABI_MAJOR = 0
SONAME = f"libhpu.so.{ABI_MAJOR}"


def sized(struct_type: type) -> ctypes.Structure:
    """A struct with struct_size set, as the C _INIT macros do."""
    s = struct_type()
    s.struct_size = ctypes.sizeof(struct_type)
    return s


def options(struct_type: type, function: str, **fields: object) -> ctypes.Structure:
    """A sized options struct with `fields` set; a value of no C type its field takes raises a
    TypeError naming the field as libhpu's messages do ("hpuNllLoss: options->ignore_index: ...")."""
    s = sized(struct_type)
    for name, value in fields.items():
        try:
            setattr(s, name, value)
        except TypeError as e:
            raise TypeError(f"{function}: options->{name}: {e}") from None
    return s


def find(soname: str, override: str, location: str, beside: str = "") -> tuple[ctypes.CDLL, str]:
    """Loads `soname`: from the file the variable `override` names (when set, nothing else
    is tried), next to the package, where _location.py's `location` says, in the folder
    of `beside` (the libhpu already loaded), then from the system library path."""
    explicit = os.environ.get(override)
    if explicit:
        try:
            return ctypes.CDLL(explicit), explicit
        except OSError as e:
            raise ImportError(f"hpu: cannot load {override}={explicit!r}: {e}") from None
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, soname)]
    try:
        from . import _location  # written by the build tree or cmake --install
        candidates.append(os.path.normpath(os.path.join(here, getattr(_location, location))))
    except (ImportError, AttributeError):
        pass
    if os.path.dirname(beside):
        candidates.append(os.path.join(os.path.dirname(os.path.abspath(beside)), soname))
    tried = []
    for path in candidates:
        if os.path.exists(path):
            try:
                return ctypes.CDLL(path), path
            except OSError as e:
                tried.append(f"{path}: {e}")
        else:
            tried.append(f"{path}: no such file")
    try:
        return ctypes.CDLL(soname), soname
    except OSError as e:
        tried.append(f"{soname} on the system library path: {e}")
    name = soname.split(".so")[0]
    raise ImportError(f"hpu: cannot find {name}; set {override} to its path. Tried:\n  " + "\n  ".join(tried))


lib, path = find(SONAME, "HPU_LIBRARY", "LIBRARY")


def last_error_message() -> str:
    """hpuGetLastErrorMessage() as text."""
    return lib.hpuGetLastErrorMessage().decode("utf-8", "replace")


def _check(status: int, func, args):
    if status != 0:
        raise error_for(status, last_error_message())
    return status


def argument_error(name: str, e: ctypes.ArgumentError) -> TypeError:
    """ctypes' "argument 3: TypeError: wrong type" as a TypeError that names the C parameter."""
    m = re.match(r"argument (\d+): (?:\w+: )?(.*)", str(e))
    params = _abi.FUNCTIONS[name][2]
    if not m or not 0 < int(m.group(1)) <= len(params):
        return TypeError(f"{name}: {e}")
    return TypeError(f"{name}: {params[int(m.group(1)) - 1][0]}: {m.group(2)}")


def _missing(name: str, where: str):
    def call(*args):
        raise error_for(Status.UNSUPPORTED, f"{name}: this {where} does not export it; it is older than the binding")
    return call


def declare(library: ctypes.CDLL, which: str, where: str) -> Dict[str, Callable]:
    """Declares the functions of `which` ("hpu" or "hpu-trainer") that _abi.FUNCTIONS lists
    (generated from the headers) on `library`; `where` names it in errors. A function
    returning hpuStatus_t raises the matching HpuError when it fails."""
    out: Dict[str, Callable] = {}
    for name, (owner, restype, params) in _abi.FUNCTIONS.items():
        if owner != which:
            continue
        try:
            fn = getattr(library, name)
        except AttributeError:
            out[name] = _missing(name, where)
            continue
        fn.argtypes = [t for _, t, _ in params]
        if restype is Status:
            fn.restype, fn.errcheck = ctypes.c_int, _check
        else:
            fn.restype = restype
        out[name] = fn
    return out


globals().update(declare(lib, "hpu", f"libhpu ({path})"))

version_number = lib.hpuGetVersion()
if version_number >> 16 != ABI_MAJOR:
    raise ImportError(f"hpu: {path} is libhpu {version_number >> 16}.x; this binding needs {ABI_MAJOR}.x")
