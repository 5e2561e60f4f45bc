"""Communicators and collectives with torch.distributed's names, ranks in this process."""
import math
import threading
import unittest

import hpu

N = 4


def per_rank(make):
    return [make(r) for r in range(N)]


class Collectives(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.comms = hpu.Comm.init_all(list(range(N)))

    @classmethod
    def tearDownClass(cls):
        for c in cls.comms:
            c.destroy()

    def sync(self):
        for c in self.comms:
            c.synchronize()

    def test_ranks(self):
        self.assertEqual([(c.rank, c.world_size, c.device.index) for c in self.comms],
                         [(r, N, r) for r in range(N)])
        self.assertEqual(self.comms[2].get_rank(), 2)
        self.assertEqual(self.comms[2].get_world_size(), N)

    def test_all_reduce_every_op(self):
        values = [[1.5, -2.0, 3.0], [0.5, 4.0, -1.0], [2.0, 2.0, 2.0], [-1.0, 0.25, 8.0]]
        expected = {
            "sum": [sum(v[i] for v in values) for i in range(3)],
            hpu.ReduceOp.PRODUCT: [math.prod(v[i] for v in values) for i in range(3)],
            "min": [min(v[i] for v in values) for i in range(3)],
            hpu.ReduceOp.MAX: [max(v[i] for v in values) for i in range(3)],
            "avg": [sum(v[i] for v in values) / N for i in range(3)],
        }
        for op, want in expected.items():
            ts = per_rank(lambda r: hpu.tensor(values[r], device=r))
            for c, t in zip(self.comms, ts):
                self.assertIs(c.all_reduce(t, op=op), t)
            self.sync()
            for t in ts:
                self.assertEqual(t.tolist(), want, op)

    def test_all_reduce_integers_and_bfloat16(self):
        ts = per_rank(lambda r: hpu.tensor([r, 100 * r], dtype=hpu.int32, device=r))
        for c, t in zip(self.comms, ts):
            c.all_reduce(t)
        bs = per_rank(lambda r: hpu.tensor([0.5 * (r + 1)] * 1000, dtype=hpu.bfloat16, device=r))
        for c, t in zip(self.comms, bs):
            c.all_reduce(t)
        self.sync()
        self.assertEqual(ts[3].tolist(), [6, 600])
        self.assertEqual(bs[1].tolist(), [5.0] * 1000)

    def test_broadcast_and_reduce(self):
        ts = per_rank(lambda r: hpu.tensor([float(r)] * 4, device=r))
        for c, t in zip(self.comms, ts):
            c.broadcast(t, src=2)
        self.sync()
        self.assertEqual([t.tolist() for t in ts], [[2.0] * 4] * N)
        ts = per_rank(lambda r: hpu.tensor([float(r + 1)], device=r))
        for c, t in zip(self.comms, ts):
            c.reduce(t, dst=1, op="max")
        self.sync()
        self.assertEqual(ts[1].tolist(), [4.0])
        self.assertEqual(ts[0].tolist(), [1.0])

    def test_gathers_and_scatters(self):
        ins = per_rank(lambda r: hpu.tensor([r, 10 * r], dtype=hpu.int64, device=r))
        outs = per_rank(lambda r: hpu.empty(2 * N, dtype=hpu.int64, device=r))
        lists = per_rank(lambda r: [hpu.empty(2, dtype=hpu.int64, device=r) for _ in range(N)])
        for c, o, i, lst in zip(self.comms, outs, ins, lists):
            c.all_gather_into_tensor(o, i)
            c.all_gather(lst, i)
        self.sync()
        flat = [x for r in range(N) for x in (r, 10 * r)]
        self.assertEqual(outs[2].tolist(), flat)
        self.assertEqual([t.tolist() for t in lists[0]], [[r, 10 * r] for r in range(N)])

        big = per_rank(lambda r: hpu.tensor([float(r * 100 + i) for i in range(2 * N)], device=r))
        out = per_rank(lambda r: hpu.empty(2, device=r))
        for c, o, i in zip(self.comms, out, big):
            c.reduce_scatter_tensor(o, i)
        self.sync()
        for r in range(N):
            self.assertEqual(out[r].tolist(), [sum(q * 100 + 2 * r + k for q in range(N)) for k in range(2)])

        parts = per_rank(lambda r: [hpu.tensor([float(r + q)], device=r) for q in range(N)])
        out = per_rank(lambda r: hpu.empty(1, device=r))
        for c, o, p in zip(self.comms, out, parts):
            c.reduce_scatter(o, p, op=hpu.ReduceOp.MIN)
        self.sync()
        self.assertEqual([o.item() for o in out], [float(r) for r in range(N)])

    def test_all_to_all(self):
        ins = per_rank(lambda r: hpu.tensor([r * 10 + q for q in range(N)], dtype=hpu.int32, device=r))
        outs = per_rank(lambda r: hpu.empty(N, dtype=hpu.int32, device=r))
        for c, o, i in zip(self.comms, outs, ins):
            c.all_to_all_single(o, i)
        self.sync()
        self.assertEqual(outs[1].tolist(), [q * 10 + 1 for q in range(N)])

    def test_send_recv_in_a_group(self):
        a = hpu.tensor([1.0, 2.0], device=0)
        b = hpu.tensor([3.0, 4.0], device=1)
        ra, rb = hpu.empty(2, device=0), hpu.empty(2, device=1)
        with hpu.group():
            self.comms[0].send(a, 1)
            self.comms[0].recv(ra, 1)
            self.comms[1].send(b, 0)
            self.comms[1].recv(rb, 0)
        self.sync()
        self.assertEqual((ra.tolist(), rb.tolist()), ([3.0, 4.0], [1.0, 2.0]))

    def test_barrier_and_timeout(self):
        for c in self.comms:
            c.barrier()
        self.sync()
        c = self.comms[0]
        saved = c.timeout
        c.timeout = 5.5
        self.assertEqual(c.timeout, 5.5)
        c.timeout = 0
        self.assertEqual(c.timeout, saved)
        with self.assertRaises(hpu.InvalidArgumentError):
            c.timeout = -1

    def test_checks_before_the_call(self):
        c = self.comms[0]
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            c.all_reduce(hpu.zeros(3, device=1))
        self.assertIn("hpu:1", cm.exception.message)
        with self.assertRaises(TypeError):
            c.all_reduce([1, 2])
        with self.assertRaises(hpu.InvalidArgumentError):
            c.all_reduce(hpu.zeros(3, 4, device=0).T)
        with self.assertRaises(hpu.InvalidArgumentError):
            c.all_reduce(hpu.zeros(3, device=0), op="xor")
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            c.all_gather_into_tensor(hpu.empty(5, device=0), hpu.empty(2, device=0))
        self.assertIn("output has 5 elements; 8 are needed", cm.exception.message)
        with self.assertRaises(hpu.InvalidArgumentError):
            c.all_gather_into_tensor(hpu.empty(8, device=0), hpu.empty(2, dtype=hpu.int32, device=0))
        with self.assertRaises(hpu.InvalidArgumentError):
            c.reduce_scatter_tensor(hpu.empty(1, device=0), hpu.empty(6, device=0))
        with self.assertRaises(hpu.InvalidArgumentError):
            c.all_gather([hpu.empty(1, device=0)], hpu.empty(1, device=0))

    def test_library_checks(self):
        with self.assertRaises(hpu.HpuError) as cm:
            self.comms[0].broadcast(hpu.zeros(2, device=0), src=N)
        self.assertIn("hpuBroadcast", cm.exception.message)
        self.assertIn(str(N), cm.exception.message)


class Groups(unittest.TestCase):
    def test_init_rank_from_threads(self):
        uid = hpu.get_unique_id()
        self.assertEqual(len(uid), hpu.comm.UNIQUE_ID_BYTES)
        self.assertNotEqual(uid, hpu.get_unique_id())
        results, errors = [None] * 3, []

        def rank(r):
            try:
                with hpu.Comm.init_rank(4 + r, 3, uid, r) as c:
                    t = hpu.tensor([float(r)] * 8, device=4 + r)
                    c.all_reduce(t)
                    c.synchronize()
                    results[r] = (c.rank, c.world_size, t.tolist())
            except Exception as e:  # reported below
                errors.append(e)
        threads = [threading.Thread(target=rank, args=(r,)) for r in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(results, [(r, 3, [3.0] * 8) for r in range(3)])

    def test_abort(self):
        comms = hpu.Comm.init_all([6, 7])
        comms[0].abort()
        self.assertIsInstance(comms[0].get_async_error(), hpu.AbortedError)
        with self.assertRaises(hpu.AbortedError):
            comms[0].all_reduce(hpu.zeros(2, device=6))
        for c in comms:
            c.abort()
            c.destroy()

    def test_bad_groups(self):
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.Comm.init_all([0, 0])
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.Comm.init_rank(0, 2, b"short", 0)
        with self.assertRaises(hpu.HpuError) as cm:
            hpu.Comm.init_rank(0, 2, hpu.get_unique_id(), 5)
        self.assertIn("hpuCommInitRank", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
