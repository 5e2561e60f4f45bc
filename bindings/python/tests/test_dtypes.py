"""Data types: the enum numbers, names, torch aliases and buffer formats."""
import pickle
import sys
import unittest

import hpu
from hpu import dtypes


class DTypes(unittest.TestCase):
    def test_numbers_are_the_c_enum(self):
        expected = {"bool_": 0, "uint8": 1, "int8": 2, "int32": 3, "uint32": 4, "int64": 5, "uint64": 6,
                    "float16": 7, "bfloat16": 8, "float32": 9, "float64": 10}
        self.assertEqual({d.name: d.value for d in dtypes.ALL}, expected)
        for d in dtypes.ALL:
            self.assertIs(dtypes.from_value(d.value), d)

    def test_sizes_and_kinds(self):
        self.assertEqual([d.itemsize for d in dtypes.ALL], [1, 1, 1, 4, 4, 8, 8, 2, 2, 4, 8])
        self.assertEqual([d.name for d in dtypes.ALL if d.is_floating_point],
                         ["float16", "bfloat16", "float32", "float64"])
        self.assertIsNone(hpu.bfloat16.format)

    def test_names_and_aliases(self):
        self.assertIs(dtypes.resolve("bfloat16"), hpu.bfloat16)
        self.assertIs(dtypes.resolve("float"), hpu.float32)
        self.assertIs(dtypes.resolve("half"), hpu.float16)
        self.assertIs(dtypes.resolve("long"), hpu.int64)
        self.assertIs(dtypes.resolve("bool"), hpu.bool_)
        self.assertIs(hpu.half, hpu.float16)
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            dtypes.resolve("complex64")
        self.assertIn("'complex64'", cm.exception.message)

    def test_numpy_dtypes_when_present(self):
        if "numpy" in sys.modules and sys.modules["numpy"] is None:
            with self.assertRaises(hpu.InvalidArgumentError):
                dtypes.resolve(object)
            return
        import numpy as np
        self.assertIs(dtypes.resolve(np.float32), hpu.float32)
        self.assertIs(dtypes.resolve(np.dtype("int64")), hpu.int64)
        with self.assertRaises(hpu.InvalidArgumentError):
            dtypes.resolve(np.complex64)

    def test_formats(self):
        self.assertIs(dtypes.from_format("<f"), hpu.float32)
        self.assertIs(dtypes.from_format("e"), hpu.float16)
        self.assertIs(dtypes.from_format("q"), hpu.int64)
        self.assertIsNone(dtypes.from_format("h"))

    def test_pickles_to_the_same_object(self):
        self.assertIs(pickle.loads(pickle.dumps(hpu.bfloat16)), hpu.bfloat16)
        self.assertEqual(repr(hpu.bfloat16), "hpu.bfloat16")


if __name__ == "__main__":
    unittest.main()
