"""Tensors: creation from numpy, buffers, bytes and lists, dtypes (bfloat16 too), views,
host copies, fills, the random generator, and the checks made before each call."""
import array
import struct
import unittest

import hpu

try:
    import numpy as np
except ImportError:  # test_no_numpy runs this module with numpy blocked
    np = None


def bf16_bits(x):
    """Round-to-nearest-even bfloat16 bits of a float32 (reference, in pure Python)."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


class FromLists(unittest.TestCase):
    def test_torch_default_dtypes(self):
        self.assertIs(hpu.tensor([1.5, 2]).dtype, hpu.float32)
        self.assertIs(hpu.tensor([1, 2]).dtype, hpu.int64)
        self.assertIs(hpu.tensor([True, False]).dtype, hpu.bool_)
        t = hpu.tensor(2.5)
        self.assertEqual((t.shape, t.item()), ((), 2.5))

    def test_round_trip_every_dtype(self):
        values = [[0, 1, 2], [3, 4, 5]]
        for dt in (hpu.uint8, hpu.int8, hpu.int32, hpu.uint32, hpu.int64, hpu.uint64, hpu.float16,
                   hpu.bfloat16, hpu.float32, hpu.float64):
            t = hpu.tensor(values, dtype=dt, device=1)
            self.assertEqual((t.dtype, t.shape, t.device), (dt, (2, 3), hpu.Device(1)), dt)
            self.assertEqual(t.tolist(), values, dt)
        self.assertEqual(hpu.tensor([True, False, True]).tolist(), [True, False, True])

    def test_bfloat16_rounds_to_nearest_even(self):
        xs = [1.0, 1.00390625, 1.01171875, -3.14159, 65504.0, 1e-3, 3.0e38]
        t = hpu.tensor(xs, dtype=hpu.bfloat16)
        raw = struct.unpack(f"<{len(xs)}H", t.tobytes())
        self.assertEqual(list(raw), [bf16_bits(x) for x in xs])
        back = t.tolist()
        self.assertEqual(back, [struct.unpack("<f", struct.pack("<I", b << 16))[0] for b in raw])

    def test_ragged_and_bad_values(self):
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.tensor([[1, 2], [3]])
        with self.assertRaises(TypeError):
            hpu.tensor(["a"])
        with self.assertRaises(TypeError):
            hpu.tensor(b"\x00\x01")  # bytes have no element type: frombuffer

    def test_empty_and_zero_dims(self):
        t = hpu.tensor([])
        self.assertEqual((t.shape, t.tolist(), t.numel()), ((0,), [], 0))
        z = hpu.empty(0, 3)
        self.assertEqual(z.tolist(), [])


class FromBuffers(unittest.TestCase):
    def test_array_module(self):
        a = array.array("d", [1.25, -2.5, 3.0])
        t = hpu.tensor(a)
        self.assertEqual((t.dtype, t.tolist()), (hpu.float64, [1.25, -2.5, 3.0]))
        t32 = hpu.tensor(a, dtype=hpu.float32)
        self.assertIs(t32.dtype, hpu.float32)

    def test_memoryview_shape(self):
        m = memoryview(array.array("i", range(6))).cast("B").cast("i", (2, 3))
        t = hpu.tensor(m)
        self.assertEqual((t.shape, t.dtype, t.tolist()), ((2, 3), hpu.int32, [[0, 1, 2], [3, 4, 5]]))

    def test_frombuffer_and_tobytes(self):
        raw = bytes(range(12))
        t = hpu.frombuffer(raw, hpu.bfloat16, (2, 3))
        self.assertEqual(t.tobytes(), raw)
        i = hpu.frombuffer(bytearray(struct.pack("<4i", 1, -2, 3, -4)), "int32")
        self.assertEqual((i.shape, i.tolist()), ((4,), [1, -2, 3, -4]))
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.frombuffer(bytes(10), hpu.float32, (3,))
        self.assertIn("10 bytes", cm.exception.message)


class Views(unittest.TestCase):
    def setUp(self):
        self.t = hpu.tensor([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], dtype=hpu.float32)

    def test_indexing(self):
        self.assertEqual(self.t[1].tolist(), [4, 5, 6, 7])
        self.assertEqual(self.t[-1, 1:3].tolist(), [9, 10])
        self.assertEqual(self.t[:, ::2].tolist(), [[0, 2], [4, 6], [8, 10]])
        self.assertEqual(self.t[1, 2].item(), 6)
        self.assertEqual(self.t[:, 3].tolist(), [3, 7, 11])  # non-contiguous, then a dim dropped
        with self.assertRaises(hpu.InvalidArgumentError):
            self.t[3]
        with self.assertRaises(hpu.InvalidArgumentError):
            self.t[::-1]
        with self.assertRaises(TypeError):
            self.t["a"]

    def test_transpose_and_reshape(self):
        tt = self.t.T
        self.assertEqual((tt.shape, tt.stride(), tt.is_contiguous()), ((4, 3), (1, 4), False))
        self.assertEqual(tt.tolist()[1], [1, 5, 9])
        self.assertEqual(self.t.reshape(2, -1).shape, (2, 6))
        self.assertEqual(tt.reshape(-1).tolist()[:4], [0, 4, 8, 1])  # made contiguous first
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            self.t.reshape(5, -1)
        self.assertIn("12 elements", cm.exception.message)
        with self.assertRaises(hpu.InvalidArgumentError):
            self.t.transpose(0, 2)

    def test_views_write_through(self):
        self.t[1] = 0.5
        self.t[2, 1:3] = [20, 30]
        self.assertEqual(self.t.tolist(), [[0, 1, 2, 3], [0.5] * 4, [8, 20, 30, 11]])


class Data(unittest.TestCase):
    def test_fills_and_conversions(self):
        self.assertEqual(hpu.full((2, 2), 7, dtype=hpu.int32).tolist(), [[7, 7], [7, 7]])
        self.assertEqual(hpu.ones(3).tolist(), [1, 1, 1])
        self.assertEqual(hpu.zeros(2, dtype="bfloat16").tolist(), [0, 0])
        t = hpu.tensor([1.7, -2.7, 300.0])
        self.assertEqual(t.to(hpu.int32).tolist(), [1, -2, 300])      # toward zero
        self.assertEqual(t.to(hpu.uint8).tolist(), [1, 0, 255])       # saturates
        moved = t.to("hpu:2")
        self.assertEqual((moved.device.index, moved.tolist()), (2, t.tolist()))
        self.assertIs(t.to(hpu.float32), t)
        c = t.clone()
        c.fill_(0)
        self.assertNotEqual(t.tolist(), c.tolist())

    def test_introspection_and_in_place_fills(self):
        t = hpu.tensor([[1.5, 2.5, 3.5]])
        self.assertEqual((t.ndim, t.dim(), t.numel(), t.element_size(), t.nbytes), (2, 2, 3, 4, 12))
        self.assertNotEqual(t.data_ptr(), 0)
        self.assertEqual(hpu.empty(0).data_ptr(), 0)
        d = t.double()
        self.assertEqual((d.dtype, d.element_size(), d.tolist()), (hpu.float64, 8, [[1.5, 2.5, 3.5]]))
        self.assertIs(t.zero_(), t)
        self.assertEqual(t.tolist(), [[0, 0, 0]])
        hpu.manual_seed(3, 0)
        n = hpu.empty(4000).normal_(10.0, 0.5).tolist()
        mean = sum(n) / len(n)
        std = (sum((x - mean) ** 2 for x in n) / len(n)) ** 0.5
        self.assertLess(abs(mean - 10.0), 0.05)  # 4000 draws: the mean's sigma is 0.008
        self.assertLess(abs(std - 0.5), 0.05)

    def test_copy_between_devices_and_dtypes(self):
        src = hpu.tensor([[1.5, 2.5]], device=0)
        dst = hpu.empty(1, 2, dtype=hpu.float64, device=3).copy_(src)
        self.assertEqual(dst.tolist(), [[1.5, 2.5]])
        with self.assertRaises(hpu.InvalidArgumentError):
            dst.copy_(hpu.zeros(2))

    def test_a_copy_across_devices_waits_for_the_sources_work(self):
        for _ in range(5):
            a = hpu.full((512, 512), 1.0, device=2)
            moved = (a @ a).to(3)  # the product is still running on device 2
            self.assertEqual(moved.sum().item(), 512.0 ** 3)

    def test_later_work_on_the_sources_device_waits_for_the_copy(self):
        for _ in range(5):
            busy = hpu.full((512, 512), 1.0, device=3)
            busy = busy @ busy  # the copy queues behind this on device 3
            src = hpu.full((512, 512), 2.0, device=2)
            dst = hpu.empty(512, 512, device=3).copy_(src)
            src.fill_(0)
            self.assertEqual(dst.sum().item(), 2.0 * 512 * 512)
        hpu.synchronize(2)  # leaves no queued work to defer other tests' frees

    def test_memory_is_counted(self):
        before = hpu.memory_allocated(5)
        t = hpu.empty(1000, dtype=hpu.float32, device=5)
        self.assertEqual(hpu.memory_allocated(5) - before, 4096)  # 4000 bytes rounded to 512
        self.assertEqual(t.nbytes, 4000)
        del t
        self.assertEqual(hpu.memory_allocated(5), before)

    def test_random_generator(self):
        hpu.manual_seed(42, 4)
        a = hpu.rand(1000, device=4).tolist()
        state = hpu.get_rng_state(4)
        self.assertEqual(state, (42, 1000))
        b = hpu.randn(1000, device=4).tolist()
        hpu.set_rng_state((42, 0), 4)
        self.assertEqual(hpu.rand(1000, device=4).tolist(), a)
        hpu.set_rng_state(state, 4)
        self.assertEqual(hpu.randn(1000, device=4).tolist(), b)
        self.assertTrue(all(0 <= x < 1 for x in a))
        mean = sum(b) / len(b)
        self.assertLess(abs(mean), 0.2)  # 1000 standard normals: mean within 6 sigma

    def test_checks(self):
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.empty(-1)
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.empty(*([1] * 9))
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.empty(2, dtype="complex64")
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.tensor([1, 2]).item()
        with self.assertRaises(hpu.UnsupportedError):
            hpu.zeros(3, dtype=hpu.int32).uniform_()
        with self.assertRaises(hpu.NotFoundError):
            hpu.zeros(3, device=99)

    def test_streams(self):
        s = hpu.Stream(1)
        with hpu.stream(s):
            t = hpu.zeros(1 << 16, device=1)
            t.fill_(2)
            self.assertEqual(t[:3].tolist(), [2, 2, 2])
        s.synchronize()


@unittest.skipIf(np is None, "needs numpy (test_no_numpy runs the rest without it)")
class Numpy(unittest.TestCase):
    def test_round_trip(self):
        for dt in (np.float32, np.float64, np.float16, np.int8, np.uint8, np.int32, np.uint32, np.int64,
                   np.uint64, np.bool_):
            a = (np.arange(24) % 7).astype(dt).reshape(2, 3, 4)
            t = hpu.from_numpy(a)
            self.assertEqual(t.shape, (2, 3, 4))
            b = t.numpy()
            self.assertEqual(b.dtype, a.dtype)
            np.testing.assert_array_equal(a, b)

    def test_bfloat16_against_numpy_reference(self):
        x = np.random.default_rng(0).standard_normal(1000).astype(np.float32) * 100
        t = hpu.tensor(x, dtype=hpu.bfloat16)
        bits = x.view(np.uint32).astype(np.uint64)
        expected = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        np.testing.assert_array_equal(np.frombuffer(t.tobytes(), dtype=np.uint16), expected)
        np.testing.assert_array_equal(t.numpy(), (expected.astype(np.uint32) << 16).view(np.float32))

    def test_non_contiguous_arrays_are_copied(self):
        a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
        np.testing.assert_array_equal(hpu.tensor(a).numpy(), a)

    def test_unsupported_numpy_dtype(self):
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.tensor(np.zeros(3, dtype=np.complex64))
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.tensor(np.zeros(3, dtype=np.int16))


if __name__ == "__main__":
    unittest.main()
