"""DLPack: hpu tensors and numpy arrays / torch tensors share memory without copies, each side
keeps it alive while it holds it, capsules are consumed once, and what cannot be shared raises."""
import ctypes
import gc
import sys
import unittest

import hpu
from hpu import dlpack
from support import run_python

try:
    import numpy as np
except ImportError:
    np = None
try:
    import torch
except ImportError:
    torch = None

needs_numpy = unittest.skipIf(np is None, "numpy is not installed (Debian: python3-numpy)")
needs_torch = unittest.skipIf(torch is None, "torch is not installed (Debian: python3-torch)")


class Protocol(unittest.TestCase):
    def test_device_is_cpu(self):
        self.assertEqual(hpu.zeros(2).__dlpack_device__(), (1, 0))

    def test_capsule_names_follow_max_version(self):
        t = hpu.zeros(2)
        self.assertIn('"dltensor"', repr(t.__dlpack__()))
        self.assertIn('"dltensor"', repr(t.__dlpack__(max_version=(0, 8))))
        self.assertIn('"dltensor_versioned"', repr(t.__dlpack__(max_version=(1, 0))))
        self.assertIn('"dltensor_versioned"', repr(t.__dlpack__(max_version=(1, 3))))

    def test_round_trip_through_a_capsule_shares_memory_and_consumes_it(self):
        t = hpu.tensor([1.0, 2.0, 3.0])
        for version in (None, (1, 0)):
            capsule = t.__dlpack__(max_version=version)
            back = hpu.from_dlpack(capsule)
            self.assertEqual(back.data_ptr(), t.data_ptr())
            self.assertIn('"used_dltensor', repr(capsule))
            back[1] = 20
            hpu.synchronize()
            self.assertEqual(t.tolist(), [1.0, 20.0, 3.0])
            with self.assertRaisesRegex(hpu.InvalidArgumentError, "already consumed"):
                hpu.from_dlpack(capsule)

    def test_an_export_keeps_the_memory_after_the_tensor_goes(self):
        before = hpu.memory_allocated()
        t = hpu.full(1000, 4.0)
        capsule = t.__dlpack__()
        del t
        gc.collect()
        self.assertGreater(hpu.memory_allocated(), before)
        back = hpu.from_dlpack(capsule)
        self.assertEqual(back.tolist()[-1], 4.0)
        del back, capsule
        gc.collect()
        hpu.synchronize()
        self.assertEqual(hpu.memory_allocated(), before)

    def test_an_unconsumed_capsule_gives_the_memory_back(self):
        before = hpu.memory_allocated()
        capsule = hpu.zeros(1000).__dlpack__(max_version=(1, 0))
        self.assertGreater(hpu.memory_allocated(), before)
        del capsule
        gc.collect()
        hpu.synchronize()
        self.assertEqual(hpu.memory_allocated(), before)

    def test_a_capsule_dropped_while_an_exception_unwinds_leaves_it_alone(self):
        t = hpu.zeros(2)

        def export_then_fail():
            capsule = t.__dlpack__()  # noqa: F841  (freed while the ValueError propagates)
            raise ValueError("the caller's own error")
        with self.assertRaisesRegex(ValueError, "the caller's own error"):
            export_then_fail()

    def test_the_export_waits_for_the_current_stream(self):
        s = hpu.Stream()
        t = hpu.empty(1 << 16)
        with hpu.stream(s):
            t.fill_(7)
            back = hpu.from_dlpack(t.__dlpack__())  # ordered after the fill
        self.assertEqual(s.query(), True)
        self.assertEqual(back[-1].item(), 7.0)
        t.fill_(8)
        back = hpu.from_dlpack(t.__dlpack__(stream=s))
        self.assertEqual(back[0].item(), 8.0)

    def test_exit_with_work_queued_on_an_import_is_clean(self):
        # The worker that finishes the last fill lets go of the import, and its deleter needs
        # the GIL: the interpreter must not be finalizing by then.
        r = run_python("import hpu\n"
                       "t = hpu.zeros(1 << 22)\n"
                       "h = hpu.from_dlpack(t.__dlpack__())\n"
                       "for _ in range(50):\n    h.fill_(1)\n"
                       "del h, t\n"
                       "print('exiting')\n")
        self.assertEqual((r.returncode, r.stdout.strip(), r.stderr), (0, "exiting", ""))

    def test_bad_arguments(self):
        t = hpu.zeros(2)
        with self.assertRaisesRegex(TypeError, "stream 5 is not None or an hpu.Stream"):
            t.__dlpack__(stream=5)
        with self.assertRaisesRegex(TypeError, "max_version 1 is not None or a"):
            t.__dlpack__(max_version=1)
        with self.assertRaisesRegex(TypeError, "neither a DLPack capsule nor"):
            hpu.from_dlpack([1.0, 2.0])

    def test_a_freed_tensor_is_refused(self):
        t = hpu.zeros(2)
        t.__del__()  # releases the handle, as garbage collection would
        with self.assertRaisesRegex(hpu.InvalidHandleError, "hpuTensorToDLPack: tensor is NULL"):
            t.__dlpack__()

    def test_a_read_only_versioned_capsule_is_refused_and_left_to_its_producer(self):
        values = (ctypes.c_float * 2)(1, 2)
        shape = (ctypes.c_int64 * 1)(2)
        deleted = []
        deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda m: deleted.append(m))
        m = dlpack.DLManagedTensorVersioned()
        m.version.major = 1
        m.flags = 1  # DLPACK_FLAG_BITMASK_READ_ONLY
        m.deleter = ctypes.cast(deleter, ctypes.c_void_p).value
        m.dl_tensor.data = ctypes.addressof(values)
        m.dl_tensor.device.device_type = 1
        m.dl_tensor.ndim = 1
        m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits, m.dl_tensor.dtype.lanes = 2, 32, 1
        m.dl_tensor.shape = shape
        capsule = dlpack._capsule_new(ctypes.addressof(m), b"dltensor_versioned", None)
        with self.assertRaisesRegex(hpu.UnsupportedError, "managed->flags 0x1 has DLPACK_FLAG_BITMASK_READ_ONLY"):
            hpu.from_dlpack(capsule)
        self.assertIn('"dltensor_versioned"', repr(capsule))  # not consumed
        self.assertEqual(deleted, [])
        m.flags = 0  # writable: taken, and the deleter runs once the tensor goes
        t = hpu.from_dlpack(capsule)
        self.assertEqual(t.tolist(), [1.0, 2.0])
        del t
        gc.collect()
        hpu.synchronize()
        self.assertEqual(deleted, [ctypes.addressof(m)])

    def test_a_capsule_of_another_kind_is_refused(self):
        other = dlpack._capsule_new(ctypes.addressof(ctypes.c_int(0)), b"not_a_tensor", None)
        with self.assertRaisesRegex(hpu.InvalidArgumentError, "named 'not_a_tensor'"):
            hpu.from_dlpack(other)


@needs_numpy
class Numpy(unittest.TestCase):
    def test_numpy_reads_an_hpu_tensor_in_place(self):
        t = hpu.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        a = np.from_dlpack(t)
        self.assertEqual(a.ctypes.data, t.data_ptr())
        np.testing.assert_array_equal(a, [[1, 2, 3], [4, 5, 6]])
        t[0, 1] = 20  # written through hpu, read through numpy
        hpu.synchronize()
        self.assertEqual(a[0, 1], 20)
        del t
        gc.collect()
        self.assertEqual(a[1, 2], 6)  # the array keeps the memory

    def test_numpy_reads_a_view_with_its_strides(self):
        t = hpu.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=hpu.float64)
        a = np.from_dlpack(t.T)
        np.testing.assert_array_equal(a, [[1, 4], [2, 5], [3, 6]])
        self.assertEqual(a.strides, (8, 24))

    def test_hpu_shares_a_numpy_arrays_memory(self):
        n = np.arange(6, dtype=np.float32).reshape(2, 3)
        refs = sys.getrefcount(n)
        h = hpu.from_dlpack(n)
        self.assertEqual(h.data_ptr(), n.ctypes.data)
        self.assertEqual((h.shape, h.dtype), ((2, 3), hpu.float32))
        n[1, 1] = 40  # written through numpy, read through hpu
        self.assertEqual(h[1, 1].item(), 40.0)
        h.fill_(3)  # and the other way
        hpu.synchronize()
        np.testing.assert_array_equal(n, np.full((2, 3), 3, np.float32))
        # Released while a fill may still be queued: the producer's deleter runs (with the
        # GIL, on whichever thread) once the work is done, and drops numpy's reference.
        h.fill_(5)
        del h
        gc.collect()
        hpu.synchronize()
        self.assertEqual(sys.getrefcount(n), refs)
        self.assertEqual(n[0, 0], 5)

    def test_hpu_keeps_a_numpy_array_alive(self):
        n = np.arange(4, dtype=np.int64)
        h = hpu.from_dlpack(n)
        del n
        gc.collect()
        self.assertEqual(h.tolist(), [0, 1, 2, 3])

    def test_a_strided_numpy_view_is_shared(self):
        n = np.arange(12, dtype=np.float64).reshape(3, 4)
        h = hpu.from_dlpack(n[:, ::2])
        self.assertEqual(h.stride(), (4, 2))
        self.assertEqual(h.tolist(), [[0.0, 2.0], [4.0, 6.0], [8.0, 10.0]])

    def test_a_consumer_that_refuses_an_export_keeps_its_error_and_the_memory_comes_back(self):
        before = hpu.memory_allocated()
        b = hpu.tensor([True, False] * 100)
        with self.assertRaisesRegex(RuntimeError, "Unsupported dtype"):  # NumPy 1.x lacks kDLBool
            np.from_dlpack(b)
        del b
        gc.collect()
        hpu.synchronize()
        self.assertEqual(hpu.memory_allocated(), before)

    def test_what_cannot_be_shared_raises(self):
        with self.assertRaisesRegex(hpu.UnsupportedError, r"strides\[0\] is -1; libhpu tensors take strides >= 0"):
            hpu.from_dlpack(np.arange(6.0)[::-1])
        with self.assertRaisesRegex(hpu.UnsupportedError, "code 0 kDLInt, 16 bits, 1 lanes"):
            hpu.from_dlpack(np.arange(6, dtype=np.int16))
        with self.assertRaisesRegex(hpu.UnsupportedError, "code 5 kDLComplex"):
            hpu.from_dlpack(np.zeros(2, dtype=np.complex64))


@needs_torch
class Torch(unittest.TestCase):
    def test_torch_shares_an_hpu_tensor(self):
        t = hpu.tensor([[1.0, 2.0], [3.0, 4.0]])
        x = torch.from_dlpack(t)
        self.assertEqual(x.data_ptr(), t.data_ptr())
        x[1, 0] = 30  # written through torch, read through hpu
        self.assertEqual(t.tolist(), [[1.0, 2.0], [30.0, 4.0]])
        t.fill_(9)  # and the other way
        hpu.synchronize()
        self.assertTrue(bool((x == 9).all()))

    def test_hpu_shares_a_torch_tensor(self):
        x = torch.arange(6, dtype=torch.int32).reshape(2, 3)
        h = hpu.from_dlpack(x)
        self.assertEqual((h.shape, h.dtype, h.data_ptr()), ((2, 3), hpu.int32, x.data_ptr()))
        h[0, 2] = 70
        hpu.synchronize()
        self.assertEqual(int(x[0, 2]), 70)
        x[1, 1] = 11
        self.assertEqual(h[1, 1].item(), 11)
        del x
        gc.collect()
        self.assertEqual(h.tolist(), [[0, 1, 70], [3, 11, 5]])

    def test_bf16_both_ways(self):
        x = torch.tensor([1.5, -2.0, 0.25], dtype=torch.bfloat16)
        h = hpu.from_dlpack(x)
        self.assertIs(h.dtype, hpu.bfloat16)
        self.assertEqual(h.tolist(), [1.5, -2.0, 0.25])
        h.fill_(3.0)
        hpu.synchronize()
        self.assertEqual(x.tolist(), [3.0, 3.0, 3.0])
        t = hpu.tensor([0.5, 8.0]).bfloat16()
        y = torch.from_dlpack(t)
        self.assertEqual(y.dtype, torch.bfloat16)
        self.assertEqual(y.tolist(), [0.5, 8.0])
        self.assertEqual(y.data_ptr(), t.data_ptr())


if __name__ == "__main__":
    unittest.main()
