"""Host memory of any object with the buffer protocol, without copying.

bytes, bytearray, memoryview, array.array, numpy arrays, ctypes arrays, mmap:
``host_buffer(obj)`` gives the address and size of their contiguous memory
for as long as the ``with`` block holds it (the exporter cannot resize or free
it meanwhile), through CPython's PyObject_GetBuffer.
"""
from __future__ import annotations

import ctypes
from contextlib import contextmanager
from typing import Iterator, Tuple

from .errors import InvalidArgumentError


class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_PyBUF_SIMPLE, _PyBUF_WRITABLE = 0, 1
_get = ctypes.pythonapi.PyObject_GetBuffer
_get.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get.restype = ctypes.c_int
_release = ctypes.pythonapi.PyBuffer_Release
_release.argtypes = [ctypes.POINTER(_PyBuffer)]
_release.restype = None


@contextmanager
def host_buffer(obj: object, *, writable: bool = False, name: str = "buffer") -> Iterator[Tuple[int, int]]:
    """Yields (address, nbytes) of obj's contiguous memory; address is 0 when nbytes is 0."""
    view = _PyBuffer()
    flags = _PyBUF_WRITABLE if writable else _PyBUF_SIMPLE
    try:
        _get(obj, ctypes.byref(view), flags)
    except (BufferError, TypeError, ValueError) as e:
        if _has_buffer(obj):
            need = "a writable, contiguous" if writable else "a contiguous"
            raise InvalidArgumentError(f"{name} must be {need} buffer: {e}") from None
        raise TypeError(f"{name} must support the buffer protocol (bytes, bytearray, array, numpy), "
                        f"not {type(obj).__name__}") from None
    try:
        yield (view.buf or 0) if view.len else 0, view.len
    finally:
        _release(ctypes.byref(view))


def _has_buffer(obj: object) -> bool:
    try:
        memoryview(obj).release()
        return True
    except TypeError:
        return False
