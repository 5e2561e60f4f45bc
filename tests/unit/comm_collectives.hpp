// Every collective algorithm run through one rank's endpoint of a process
// transport (comm_wire: tcp and shm; comm_verbs: verbs over the fake libibverbs),
// on host memory, checked against the references of comm_harness.hpp. The
// algorithms post their steps chained (Ctx::send's `after`), so this also runs
// the transports' chains: many steps in flight, sizes on both sides of the
// eager limits, the 256 KiB pieces a tcp receive reduces as they arrive and
// the 1 MiB segments of the ring and the pairwise exchange; and the
// reductions the rule picks give the bits of rank order, as between threads. The test links libhpu's objects
// (comm_wire.cmake) to reach the internal classes.
#pragma once

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "comm/algorithm.hpp"
#include "comm_harness.hpp"

namespace comm_test {

// 0 when every result is right, else a code naming the collective.
inline int collectives(hpu::comm::Transport &t) {
  using namespace hpu::comm;
  const int n = t.size(), r = t.rank();
  Scratch scratch;
  uint64_t seq = 0;
  auto run = [&](CollKind kind, hpuDataType_t dt, size_t count, int root, hpuRedOp_t op,
                 const std::function<void(Ctx &)> &body) {
    OpHeader h;
    h.seq = ++seq;
    h.coll = static_cast<uint32_t>(kind);
    h.dtype = dt;
    h.count = count;
    h.root = root;
    h.redop = op;
    t.begin(h);
    Ctx c(t, h, 20.0, scratch);
    body(c);
  };
  struct Case {
    hpuDataType_t t;
    hpuRedOp_t op;
  };
  const Case cases[] = {{HPU_FLOAT32, HPU_SUM}, {HPU_BFLOAT16, HPU_SUM}, {HPU_INT32, HPU_MAX},
                        {HPU_FLOAT64, HPU_AVG}, {HPU_UINT8, HPU_MIN},   {HPU_INT64, HPU_PROD}};
  enum Algo { kPairwise, kRing, kHalvingDoubling };
  auto allreduce = [&](Algo a, const Case &k, size_t count, const void *in, void *out) {
    run(CollKind::allreduce, k.t, count, -1, k.op, [&](Ctx &c) {
      if (count < 1000 && a == kPairwise) gather_allreduce(c, in, out, count, k.t, k.op);
      else if (count < 1000) recursive_doubling_allreduce(c, in, out, count, k.t, k.op);
      else if (a == kPairwise) pairwise_allreduce(c, in, out, count, k.t, k.op);
      else if (a == kRing) ring_allreduce(c, in, out, count, k.t, k.op);
      else halving_doubling_allreduce(c, in, out, count, k.t, k.op);
    });
  };
  for (Algo a : {kPairwise, kRing, kHalvingDoubling})
    for (const Case &k : cases)
      for (size_t count : {size_t(1), size_t(4099), size_t(300007)}) {
        auto in = encode(k.t, inputs(k.t, k.op, r, count));
        std::vector<uint8_t> out(in.size());
        allreduce(a, k, count, in.data(), out.data());
        if (out != reference(k.t, k.op, n, count)) return 20;
      }
  // f32 in place, around the tcp thresholds: 256 KiB pieces, 512 KiB chunks,
  // 1 MiB eager messages and ring segments (the last count makes two per
  // chunk at up to 4 ranks, and halving-doubling's first messages clear to
  // send).
  for (Algo a : {kPairwise, kRing, kHalvingDoubling})
    for (hpuRedOp_t op : {HPU_SUM, HPU_AVG})
      for (size_t count : {size_t(65537), size_t(262143), size_t(524289), size_t(1048583)}) {
        if (op == HPU_AVG && count > 300000) continue;
        const Case k{HPU_FLOAT32, op};
        auto buf = encode(k.t, inputs(k.t, op, r, count));
        allreduce(a, k, count, buf.data(), buf.data());
        if (buf != reference(k.t, op, n, count)) return a == kRing ? 26 : a == kPairwise ? 28 : 27;
      }
  // The reductions of the rule in rank order, here as between threads and
  // in the shared area: random floats whose sum depends on the order, f32
  // and bf16, in one step, one segment and several, in place and not.
  std::mt19937 gen(3);
  for (hpuDataType_t t : {HPU_FLOAT32, HPU_BFLOAT16})
    for (size_t count : {size_t(999), size_t(65537), size_t(1048583)}) {
      auto x = random_floats(t, n, count * static_cast<size_t>(n), gen);  // the same on every rank
      std::vector<std::vector<float>> firsts(x.size());
      for (size_t q = 0; q < x.size(); ++q) firsts[q].assign(x[q].begin(), x[q].begin() + static_cast<long>(count));
      const auto want = rank_order_sum(t, firsts), wide = rank_order_sum(t, x);
      auto in = encode_floats(t, x[static_cast<size_t>(r)]);
      std::vector<uint8_t> out(count * dtype_size(t));
      for (bool in_place : {false, true}) {
        auto buf = in;
        void *dst = in_place ? buf.data() : out.data();
        run(CollKind::allreduce, t, count, -1, HPU_SUM, [&](Ctx &c) {
          if (count < 1000) gather_allreduce(c, buf.data(), dst, count, t, HPU_SUM);
          else pairwise_allreduce(c, buf.data(), dst, count, t, HPU_SUM);
        });
        if (!std::equal(want.begin(), want.end(), static_cast<uint8_t *>(dst))) return 30;
        buf = in;
        const int root = n - 1;
        run(CollKind::reduce, t, count, root, HPU_SUM, [&](Ctx &c) {
          if (count < 1000) gather_reduce(c, buf.data(), dst, count, t, HPU_SUM, root);
          else pairwise_reduce(c, buf.data(), dst, count, t, HPU_SUM, root);
        });
        if (r == root && !std::equal(want.begin(), want.end(), static_cast<uint8_t *>(dst))) return 31;
        buf = in;
        const size_t block = out.size(), mine = static_cast<size_t>(r) * block;
        void *part = in_place ? buf.data() + mine : out.data();
        run(CollKind::reducescatter, t, count, -1, HPU_SUM,
            [&](Ctx &c) { pairwise_reducescatter(c, buf.data(), part, count, t, HPU_SUM); });
        if (!std::equal(wide.begin() + static_cast<long>(mine), wide.begin() + static_cast<long>(mine + block),
                        static_cast<uint8_t *>(part)))
          return 32;
      }
    }
  const hpuDataType_t f32 = HPU_FLOAT32;
  for (size_t count : {size_t(7), size_t(200003)}) {
    size_t bytes = count * 4;
    auto mine = encode(f32, inputs(f32, HPU_SUM, r, count));
    std::vector<uint8_t> out(bytes * static_cast<size_t>(n));
    auto everyone = [&](size_t first) {  // every rank's inputs [first, first + count), in rank order
      std::vector<uint8_t> all;
      for (int q = 0; q < n; ++q) {
        auto part = encode(f32, inputs(f32, HPU_SUM, q, count, first));
        all.insert(all.end(), part.begin(), part.end());
      }
      return all;
    };
    for (bool big : {false, true}) {
      run(CollKind::broadcast, f32, count, 1, HPU_SUM, [&](Ctx &c) {
        if (big) chain_broadcast(c, mine.data(), out.data(), bytes, 1);
        else tree_broadcast(c, mine.data(), out.data(), bytes, 1);
      });
      if (std::vector<uint8_t>(out.begin(), out.begin() + static_cast<long>(bytes)) != encode(f32, inputs(f32, HPU_SUM, 1, count)))
        return 21;
      for (bool rank_order : {false, true}) {
        run(CollKind::reduce, f32, count, 2, HPU_SUM, [&](Ctx &c) {
          if (rank_order && big) pairwise_reduce(c, mine.data(), out.data(), count, f32, HPU_SUM, 2);
          else if (rank_order) gather_reduce(c, mine.data(), out.data(), count, f32, HPU_SUM, 2);
          else if (big) chain_reduce(c, mine.data(), out.data(), count, f32, HPU_SUM, 2);
          else tree_reduce(c, mine.data(), out.data(), count, f32, HPU_SUM, 2);
        });
        if (r == 2 && std::vector<uint8_t>(out.begin(), out.begin() + static_cast<long>(bytes)) != reference(f32, HPU_SUM, n, count))
          return 22;
      }
    }
    run(CollKind::allgather, f32, count, -1, HPU_SUM, [&](Ctx &c) { ring_allgather(c, mine.data(), out.data(), count, f32); });
    if (out != everyone(0)) return 23;
    auto wide = encode(f32, inputs(f32, HPU_SUM, r, count * static_cast<size_t>(n)));
    std::vector<uint8_t> part(bytes);
    for (bool ring : {true, false}) {
      run(CollKind::reducescatter, f32, count, -1, HPU_SUM, [&](Ctx &c) {
        if (ring) ring_reducescatter(c, wide.data(), part.data(), count, f32, HPU_SUM);
        else pairwise_reducescatter(c, wide.data(), part.data(), count, f32, HPU_SUM);
      });
      if (part != reference(f32, HPU_SUM, n, count, static_cast<size_t>(r) * count)) return 24;
    }
    run(CollKind::alltoall, f32, count, -1, HPU_SUM, [&](Ctx &c) { pairwise_alltoall(c, wide.data(), out.data(), bytes); });
    if (out != everyone(static_cast<size_t>(r) * count)) return 25;
    run(CollKind::barrier, f32, 0, -1, HPU_SUM, [&](Ctx &c) { dissemination_barrier(c); });
  }
  return 0;
}

}  // namespace comm_test
