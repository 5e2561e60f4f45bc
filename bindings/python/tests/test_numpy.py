"""numpy arrays go through the buffer protocol, without copies on the host side."""
import unittest

import numpy as np

import hpu


class NumpyBuffers(unittest.TestCase):
    def test_round_trip(self):
        x = np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5
        with hpu.mem_alloc(x.nbytes) as mem:
            mem.copy_from_host(x)
            y = np.empty_like(x)
            mem.copy_to_host(y)
            np.testing.assert_array_equal(x, y)

    def test_read_only_source(self):
        x = np.linspace(0, 1, 100)
        x.flags.writeable = False
        with hpu.mem_alloc(x.nbytes) as mem:
            mem.copy_from_host(x)
            self.assertEqual(bytes(mem.copy_to_host()), x.tobytes())

    def test_read_only_destination(self):
        y = np.zeros(4)
        y.flags.writeable = False
        with hpu.mem_alloc(y.nbytes) as mem:
            with self.assertRaises(hpu.InvalidArgumentError):
                mem.copy_to_host(y)

    def test_non_contiguous(self):
        x = np.arange(20, dtype=np.int32).reshape(4, 5)[:, 1:3]
        with hpu.mem_alloc(x.nbytes) as mem:
            with self.assertRaises(hpu.InvalidArgumentError) as cm:
                mem.copy_from_host(x)
            self.assertIn("contiguous", cm.exception.message)
            mem.copy_from_host(np.ascontiguousarray(x))
            np.testing.assert_array_equal(np.frombuffer(mem.copy_to_host(), dtype=np.int32).reshape(4, 2), x)


if __name__ == "__main__":
    unittest.main()
