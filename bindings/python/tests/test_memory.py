"""Memory statistics with Habana's keys and semantics; raw device memory and copies."""
import array
import ctypes
import json
import unittest

import hpu
from hpu import _lib

G = 512  # HPU_MEM_GRANULARITY


def rounded(n):
    return (n + G - 1) // G * G


class Stats(unittest.TestCase):
    dev = 3  # a device no other test in this module allocates on concurrently

    def setUp(self):
        hpu.empty_cache(self.dev)
        hpu.reset_accumulated_memory_stats(self.dev)
        hpu.reset_peak_memory_stats(self.dev)

    def test_keys_in_habana_order(self):
        keys = list(hpu.memory_stats(self.dev))
        self.assertEqual(keys[:10], ["Limit", "InUse", "MaxInUse", "NumAllocs", "NumFrees", "ActiveAllocs",
                                     "MaxAllocSize", "TotalSystemAllocs", "TotalSystemFrees",
                                     "TotalActiveAllocs"])
        self.assertEqual(keys[10:], ["ReservedBytes", "SegmentAllocs", "SegmentFrees"])
        self.assertEqual(tuple(keys), hpu.HABANA_STATS_KEYS + hpu.ALLOCATOR_STATS_KEYS)

    def test_same_figures_as_the_json(self):
        with hpu.mem_alloc(5000, self.dev):
            out = ctypes.c_void_p()
            _lib.hpuMemStatsJson(hpu.Device(self.dev).handle, ctypes.byref(out))
            try:
                text = ctypes.string_at(out.value).decode()
            finally:
                _lib.lib.hpuFree(out)
            self.assertEqual(list(json.loads(text).items()), list(hpu.memory_stats(self.dev).items()))

    def test_counting(self):
        s0 = hpu.memory_stats(self.dev)
        a = hpu.mem_alloc(1000, self.dev)
        b = hpu.mem_alloc(3 * G, self.dev)
        s1 = hpu.memory_stats(self.dev)
        self.assertEqual(s1["InUse"] - s0["InUse"], rounded(1000) + 3 * G)
        self.assertEqual(s1["NumAllocs"], s0["NumAllocs"] + 2)
        self.assertEqual(s1["ActiveAllocs"], s1["NumAllocs"] - s1["NumFrees"])
        self.assertEqual(s1["MaxAllocSize"], 3 * G)
        self.assertEqual(s1["MaxInUse"], s1["InUse"])
        self.assertEqual(s1["TotalSystemAllocs"], s0["TotalSystemAllocs"] + 2)
        self.assertEqual(hpu.memory_allocated(self.dev), s1["InUse"])
        self.assertEqual(hpu.max_memory_allocated(self.dev), s1["MaxInUse"])
        self.assertEqual(hpu.mem_get_info(self.dev), (s1["Limit"] - s1["InUse"], s1["Limit"]))
        a.free()
        s2 = hpu.memory_stats(self.dev)
        self.assertEqual(s2["InUse"], s1["InUse"] - rounded(1000))
        self.assertEqual(s2["NumFrees"], s1["NumFrees"] + 1)
        self.assertEqual(s2["MaxInUse"], s1["MaxInUse"])
        self.assertEqual(s2["TotalActiveAllocs"], s2["TotalSystemAllocs"] - s2["TotalSystemFrees"])
        b.free()

    def test_reset_peak_sets_max_in_use_to_zero(self):
        with hpu.mem_alloc(4 * G, self.dev):
            hpu.reset_peak_memory_stats(self.dev)
            self.assertEqual(hpu.max_memory_allocated(self.dev), 0)
            self.assertGreater(hpu.memory_allocated(self.dev), 0)
            with hpu.mem_alloc(G, self.dev):
                self.assertEqual(hpu.max_memory_allocated(self.dev), hpu.memory_allocated(self.dev))

    def test_reset_accumulated(self):
        old = hpu.mem_alloc(8 * G, self.dev)
        with hpu.mem_alloc(G, self.dev):
            pass
        hpu.reset_accumulated_memory_stats(self.dev)
        s = hpu.memory_stats(self.dev)
        self.assertEqual((s["NumAllocs"], s["NumFrees"], s["MaxAllocSize"]), (0, 0, 0))
        self.assertEqual(s["MaxInUse"], s["InUse"])
        old.free()  # allocated before the reset, freed after: ActiveAllocs goes negative
        s = hpu.memory_stats(self.dev)
        self.assertEqual(s["NumFrees"], 1)
        self.assertEqual(s["ActiveAllocs"], -1)
        self.assertGreaterEqual(s["TotalActiveAllocs"], 0)

    def test_empty_cache_returns_segments(self):
        with hpu.mem_alloc(1 << 20, self.dev):
            pass
        before = hpu.memory_stats(self.dev)
        self.assertGreater(before["ReservedBytes"], 0)
        hpu.empty_cache(self.dev)
        after = hpu.memory_stats(self.dev)
        self.assertLess(after["ReservedBytes"], before["ReservedBytes"])
        self.assertGreater(after["SegmentFrees"], before["SegmentFrees"])

    def test_current_device_is_the_default(self):
        with hpu.Device(self.dev):
            self.assertEqual(hpu.memory_stats(), hpu.memory_stats(self.dev))
            with hpu.mem_alloc(G) as m:
                self.assertEqual(m.device.index, self.dev)

    def test_garbage_collection_frees(self):
        before = hpu.memory_allocated(self.dev)
        m = hpu.mem_alloc(G, self.dev)
        self.assertEqual(hpu.memory_allocated(self.dev), before + G)
        del m
        self.assertEqual(hpu.memory_allocated(self.dev), before)


class Copies(unittest.TestCase):
    def test_round_trip_of_buffer_types(self):
        payload = bytes(range(256)) * 40
        for src in (payload, bytearray(payload), memoryview(payload), array.array("B", payload),
                    (ctypes.c_char * len(payload)).from_buffer_copy(payload)):
            with hpu.mem_alloc(len(payload)) as mem:
                mem.copy_from_host(src)
                self.assertEqual(bytes(mem.copy_to_host()), payload, type(src).__name__)

    def test_offsets_and_slices(self):
        with hpu.mem_alloc(64) as mem:
            mem.fill(0xAB)
            mem.copy_from_host(memoryview(b"0123456789")[2:6], offset=10)
            out = mem.copy_to_host()
            self.assertEqual(bytes(out[8:16]), b"\xab\xab2345\xab\xab")
            part = bytearray(4)
            self.assertIs(mem.copy_to_host(part, offset=12), part)
            self.assertEqual(part, b"45\xab\xab")
            self.assertEqual(bytes(mem.copy_to_host(offset=60)), b"\xab" * 4)

    def test_typed_arrays(self):
        values = array.array("d", [1.5, -2.25, 1e300])
        with hpu.mem_alloc(values.itemsize * len(values)) as mem:
            mem.copy_from_host(values)
            back = array.array("d", [0.0] * 3)
            mem.copy_to_host(back)
            self.assertEqual(back, values)

    def test_device_to_device_across_devices(self):
        data = bytes(range(200))
        with hpu.mem_alloc(200, 0) as a, hpu.mem_alloc(300, 1) as b:
            a.copy_from_host(data)
            b.fill(7)
            b.copy_from(a, offset=100)
            self.assertEqual(bytes(b.copy_to_host()), bytes([7] * 100) + data)
            b.copy_from(a, nbytes=50, src_offset=150, offset=0)
            self.assertEqual(bytes(b.copy_to_host(bytearray(50))), data[150:])

    def test_row_gather_from_host(self):
        table = bytes(range(40))  # 10 rows of 4 bytes
        with hpu.mem_alloc(20) as mem:
            mem.fill(0xAB)
            mem.copy_rows_from_host(table, 4, [9, 0, 9, 3])
            self.assertEqual(bytes(mem.copy_to_host()), table[36:] + table[:4] + table[36:] + table[12:16] + b"\xab" * 4)
            mem.copy_rows_from_host(array.array("i", [5, 6, 7]), 4, (2,), offset=16)
            self.assertEqual(bytes(mem.copy_to_host(offset=16)), array.array("i", [7]).tobytes())
            mem.copy_rows_from_host(table, 4, [])
            with self.assertRaises(hpu.InvalidArgumentError) as cm:
                mem.copy_rows_from_host(table, 4, [1, 10])
            self.assertIn("rows[1] is 10; src holds 10 rows of 4 bytes", cm.exception.message)
            with self.assertRaises(hpu.InvalidArgumentError) as cm:
                mem.copy_rows_from_host(table, 4, [0] * 6)
            self.assertIn("24 bytes at offset 0 do not fit in 20 bytes", cm.exception.message)
            with self.assertRaises(hpu.InvalidArgumentError):
                mem.copy_rows_from_host(table, -4, [0])

    def test_zero_bytes(self):
        with hpu.mem_alloc(0) as mem:
            self.assertEqual(mem.ptr, 0)
            mem.copy_from_host(b"")
            self.assertEqual(mem.copy_to_host(), bytearray())
            mem.fill(1)

    def test_read_only_destination(self):
        with hpu.mem_alloc(16) as mem:
            with self.assertRaises(hpu.InvalidArgumentError) as cm:
                mem.copy_to_host(b"0123456789abcdef")
            self.assertIn("dst must be a writable", cm.exception.message)

    def test_not_a_buffer(self):
        with hpu.mem_alloc(16) as mem:
            with self.assertRaises(TypeError):
                mem.copy_from_host([1, 2, 3])
            with self.assertRaises(TypeError):
                mem.copy_from_host("text")

    def test_non_contiguous_source(self):
        strided = memoryview(bytearray(32))[::2]
        with hpu.mem_alloc(16) as mem:
            with self.assertRaises(hpu.InvalidArgumentError) as cm:
                mem.copy_from_host(strided)
            self.assertIn("src must be a contiguous buffer", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
