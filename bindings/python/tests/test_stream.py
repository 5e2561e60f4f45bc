"""Streams and events: ordering, queries, timing, the current stream."""
import threading
import unittest

import hpu


class Streams(unittest.TestCase):
    def test_queued_work_runs_in_order(self):
        s = hpu.Stream(1)
        self.assertEqual(s.device, hpu.Device(1))
        with hpu.mem_alloc(1 << 20, 1) as a, hpu.mem_alloc(1 << 20, 1) as b:
            for value in (1, 2, 3):
                a.fill(value, stream=s)
                b.copy_from(a, stream=s)
            s.synchronize()
            self.assertTrue(s.query())
            self.assertEqual(bytes(b.copy_to_host()), bytes([3]) * (1 << 20))
        s.close()

    def test_wait_event_orders_two_streams(self):
        producer, consumer = hpu.Stream(), hpu.Stream()
        with hpu.mem_alloc(4 << 20) as a, hpu.mem_alloc(4 << 20) as b:
            a.fill(0)
            a.fill(9, stream=producer)
            consumer.wait_event(producer.record_event())
            b.copy_from(a, stream=consumer)
            consumer.synchronize()
            self.assertEqual(bytes(b.copy_to_host()), bytes([9]) * (4 << 20))
            a.fill(5, stream=producer)
            consumer.wait_stream(producer)
            b.copy_from(a, stream=consumer)
            consumer.synchronize()
            self.assertEqual(bytes(b.copy_to_host(bytearray(8))), bytes([5]) * 8)

    def test_default_and_current_stream(self):
        d = hpu.default_stream(2)
        self.assertEqual(d, hpu.default_stream("hpu:2"))
        self.assertEqual(d, hpu.current_stream(2))
        d.close()  # never destroys the default stream
        d.synchronize()
        s = hpu.Stream(2)
        with hpu.stream(s):
            self.assertEqual(hpu.current_device(), 2)
            self.assertEqual(hpu.current_stream(), s)
            self.assertEqual(hpu.current_stream(0), hpu.default_stream(0))
            seen = []
            t = threading.Thread(target=lambda: seen.append(hpu.current_stream(2)))
            t.start()
            t.join()
            self.assertEqual(seen, [d])
        self.assertEqual(hpu.current_stream(2), d)
        with hpu.stream(None):
            self.assertEqual(hpu.current_stream(), hpu.default_stream())
        s.close()

    def test_destroyed_with_the_object(self):
        s = hpu.Stream()
        handle = s.handle
        del s
        stale = hpu.Stream.__new__(hpu.Stream)
        stale.device, stale._handle, stale._owned = hpu.Device(), handle, False
        with self.assertRaises(hpu.InvalidHandleError):
            stale.synchronize()


class Events(unittest.TestCase):
    def test_elapsed_time(self):
        s = hpu.Stream()
        start, end = hpu.Event(), hpu.Event()
        with hpu.mem_alloc(16 << 20) as mem:
            start.record(s)
            for _ in range(4):
                mem.fill(1, stream=s)
            end.record(s)
            end.synchronize()
        self.assertTrue(end.query())
        self.assertGreaterEqual(start.elapsed_time(end), 0.0)
        self.assertIsInstance(start.elapsed_time(end), float)

    def test_record_on_the_current_stream(self):
        s = hpu.Stream()
        e = hpu.Event()
        with hpu.stream(s):
            e.record()
        e.synchronize()
        e.wait(s)
        s.synchronize()

    def test_unrecorded_event_in_elapsed_time(self):
        a, b = hpu.Event(), hpu.Event()
        a.record()
        a.synchronize()
        with self.assertRaises(hpu.HpuError) as cm:
            a.elapsed_time(b)
        self.assertIn("hpuEventElapsedTime", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
