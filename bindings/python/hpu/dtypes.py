"""Data types (``hpuDataType_t``), named as in torch: ``hpu.float32``, ``hpu.bfloat16``, ..."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

from . import _abi
from .errors import InvalidArgumentError

if TYPE_CHECKING:
    import numpy

__all__ = ["DType", "DTypeLike", "bool_", "uint8", "int8", "int32", "uint32", "int64", "uint64",
           "float16", "bfloat16", "float32", "float64", "half", "float", "double", "int", "long"]


class DType:
    """A libhpu data type. ``value`` is its ``hpuDataType_t`` number, ``itemsize`` its bytes,
    ``format`` its struct/buffer-protocol format (bfloat16 has none: its raw form is
    uint16 bits), ``numpy`` the name of the numpy dtype holding it (None for bfloat16)."""

    __slots__ = ("name", "value", "itemsize", "format", "numpy", "is_floating_point")

    def __init__(self, name: str, value: int, itemsize: int, fmt: Optional[str], numpy: Optional[str],
                 floating: bool) -> None:
        self.name, self.value, self.itemsize = name, value, itemsize
        self.format, self.numpy, self.is_floating_point = fmt, numpy, floating

    def __repr__(self) -> str:
        return f"hpu.{self.name}"

    def __reduce__(self) -> str:
        return self.name


bool_ = DType("bool_", _abi.HPU_BOOL, 1, "?", "bool", False)
uint8 = DType("uint8", _abi.HPU_UINT8, 1, "B", "uint8", False)
int8 = DType("int8", _abi.HPU_INT8, 1, "b", "int8", False)
int32 = DType("int32", _abi.HPU_INT32, 4, "i", "int32", False)
uint32 = DType("uint32", _abi.HPU_UINT32, 4, "I", "uint32", False)
int64 = DType("int64", _abi.HPU_INT64, 8, "q", "int64", False)
uint64 = DType("uint64", _abi.HPU_UINT64, 8, "Q", "uint64", False)
float16 = DType("float16", _abi.HPU_FLOAT16, 2, "e", "float16", True)
bfloat16 = DType("bfloat16", _abi.HPU_BFLOAT16, 2, None, None, True)
float32 = DType("float32", _abi.HPU_FLOAT32, 4, "f", "float32", True)
float64 = DType("float64", _abi.HPU_FLOAT64, 8, "d", "float64", True)
half, float, double, int, long = float16, float32, float64, int32, int64  # torch's aliases

ALL = (bool_, uint8, int8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64)
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update(bool=bool_, half=float16, float=float32, double=float64, int=int32, long=int64)
_BY_FORMAT = {d.format: d for d in ALL if d.format}
_BY_FORMAT.update({"l": int64, "L": uint64, "h": None, "H": None})

DTypeLike = Union[DType, str, "numpy.dtype", type]
"""A data type argument: an :class:`DType`, a name ("bfloat16", "float"), or a numpy dtype."""


_BY_VALUE = {d.value: d for d in ALL}


def from_value(value: int) -> DType:
    """The DType of an ``hpuDataType_t`` number."""
    return _BY_VALUE[value]


def resolve(dtype: DTypeLike) -> DType:
    """`dtype` as a :class:`DType`; raises InvalidArgumentError for anything libhpu has no type for."""
    if isinstance(dtype, DType):
        return dtype
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None) or getattr(dtype, "__name__", None)
    if name in _BY_NAME:
        return _BY_NAME[name]
    try:  # numpy dtypes and scalar types
        import numpy
        return _BY_NAME[numpy.dtype(dtype).name]
    except (ImportError, TypeError, KeyError):
        pass
    raise InvalidArgumentError(f"dtype {dtype!r} is not a libhpu data type "
                               f"({', '.join(d.name for d in ALL)})")


def from_format(fmt: str) -> Optional[DType]:
    """The DType of a buffer-protocol format character ('f', '<d', ...), or None."""
    return _BY_FORMAT.get(fmt.lstrip("@=<>!"))
