// The ring: rank r sends to r + 1 and receives from r - 1. Reduce-scatter
// passes each chunk once around the ring, every rank combining its own part
// into it on arrival (chunk c is combined in the order c+1, c+2, ..., c, by
// each rank in turn, so every element has one fixed order); allgather then
// passes the finished chunks around. Each chunk travels in segments, and a
// rank forwards segment j as soon as it has it, so all links stay busy.
#include <cstring>
#include <functional>

#include "comm/algorithm.hpp"

namespace hpu::comm {

namespace {

using ChunkFn = std::function<Piece(int chunk)>;
// Where the partial result of `chunk` after reduce-scatter step `step` is kept:
// element e of the chunk at base + e * element size.
using AccFn = std::function<char *(int step, int chunk)>;

size_t segments_for(const ChunkFn &chunk, int n, size_t esize) {
  size_t most = 0;
  for (int i = 0; i < n; ++i) most = std::max(most, chunk(i).count);
  size_t k = (most * esize + kSegmentBytes - 1) / kSegmentBytes;
  return k == 0 ? 1 : k;
}

// After it, chunk r of rank r is complete (at acc(n - 2, r)). `reuse`: acc
// places are shared between steps, so a receive waits for the send that read
// the same place two steps before.
void reduce_scatter(Ctx &c, const char *send, size_t esize, hpuDataType_t dtype, hpuRedOp_t op, const ChunkFn &chunk,
                    size_t segs, const AccFn &acc, bool reuse) {
  const int n = c.size(), r = c.rank(), right = mod(r + 1, n), left = mod(r - 1, n);
  std::vector<RequestPtr> all, sends(segs), recvs(segs), prev_sends(segs), prev_recvs(segs);
  for (int s = 0; s < n - 1; ++s) {
    const int cs = mod(r - s - 1, n), cr = mod(r - s - 2, n);
    const Piece ps = chunk(cs), pr = chunk(cr);
    for (size_t j = 0; j < segs; ++j) {
      const auto step = static_cast<uint32_t>(static_cast<size_t>(s) * segs + j);
      const Piece gs = split(ps.count, segs, j), gr = split(pr.count, segs, j);
      if (gs.count) {
        const char *from;
        if (s == 0) {
          from = send + (ps.begin + gs.begin) * esize;
        } else {
          c.wait(prev_recvs[j]);  // the partial of chunk cs arrived at the last step
          from = acc(s - 1, cs) + gs.begin * esize;
        }
        sends[j] = c.send(right, step, from, gs.count * esize);
      }
      if (gr.count) {
        if (reuse && prev_sends[j]) c.wait(prev_sends[j]);
        Combine cb = make_combine(dtype, op, send + (pr.begin + gr.begin) * esize);
        recvs[j] = c.recv(left, step, acc(s, cr) + gr.begin * esize, gr.count * esize, &cb);
      }
    }
    for (size_t j = 0; j < segs; ++j) {
      if (sends[j]) all.push_back(sends[j]);
      if (recvs[j]) all.push_back(recvs[j]);
      prev_sends[j] = std::move(sends[j]);
      prev_recvs[j] = std::move(recvs[j]);
      sends[j].reset();
      recvs[j].reset();
    }
  }
  c.wait(all);
}

// Before it, rank r holds chunk r of `out`; after it, every chunk.
void allgather(Ctx &c, char *out, size_t esize, const ChunkFn &chunk, size_t segs, uint32_t step0) {
  const int n = c.size(), r = c.rank(), right = mod(r + 1, n), left = mod(r - 1, n);
  std::vector<RequestPtr> all, recvs(segs), prev_recvs(segs);
  for (int s = 0; s < n - 1; ++s) {
    const int cs = mod(r - s, n), cr = mod(r - s - 1, n);
    const Piece ps = chunk(cs), pr = chunk(cr);
    for (size_t j = 0; j < segs; ++j) {
      const auto step = step0 + static_cast<uint32_t>(static_cast<size_t>(s) * segs + j);
      const Piece gs = split(ps.count, segs, j), gr = split(pr.count, segs, j);
      if (gs.count) {
        if (s > 0) c.wait(prev_recvs[j]);
        all.push_back(c.send(right, step, out + (ps.begin + gs.begin) * esize, gs.count * esize));
      }
      if (gr.count) {
        recvs[j] = c.recv(left, step, out + (pr.begin + gr.begin) * esize, gr.count * esize);
        all.push_back(recvs[j]);
      }
    }
    prev_recvs.swap(recvs);
    for (auto &q : recvs) q.reset();
  }
  c.wait(all);
}

}  // namespace

void ring_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op) {
  const int n = c.size();
  const size_t esize = dtype_bytes(dtype);
  auto *out = static_cast<char *>(recv);
  ChunkFn chunk = [&](int i) { return split(count, static_cast<size_t>(n), static_cast<size_t>(i)); };
  const size_t segs = segments_for(chunk, n, esize);
  reduce_scatter(c, static_cast<const char *>(send), esize, dtype, op, chunk, segs,
                 [&](int, int i) { return out + chunk(i).begin * esize; }, false);
  const Piece mine = chunk(c.rank());
  finish_average(out + mine.begin * esize, mine.count, dtype, op, n);
  allgather(c, out, esize, chunk, segs, static_cast<uint32_t>(static_cast<size_t>(n - 1) * segs));
}

void ring_reducescatter(Ctx &c, const void *send, void *recv, size_t recvcount, hpuDataType_t dtype, hpuRedOp_t op) {
  const int n = c.size();
  const size_t esize = dtype_bytes(dtype), bytes = recvcount * esize;
  ChunkFn chunk = [&](int i) { return Piece{static_cast<size_t>(i) * recvcount, recvcount}; };
  const size_t segs = segments_for(chunk, n, esize);
  char *slots[2] = {static_cast<char *>(c.scratch(0, bytes)), static_cast<char *>(c.scratch(1, bytes))};
  reduce_scatter(c, static_cast<const char *>(send), esize, dtype, op, chunk, segs,
                 [&](int step, int) { return step == n - 2 ? static_cast<char *>(recv) : slots[step % 2]; }, true);
  finish_average(recv, recvcount, dtype, op, n);
}

void ring_allgather(Ctx &c, const void *send, void *recv, size_t sendcount, hpuDataType_t dtype) {
  const int n = c.size();
  const size_t esize = dtype_bytes(dtype);
  auto *out = static_cast<char *>(recv);
  char *mine = out + static_cast<size_t>(c.rank()) * sendcount * esize;
  if (mine != send) std::memcpy(mine, send, sendcount * esize);
  ChunkFn chunk = [&](int i) { return Piece{static_cast<size_t>(i) * sendcount, sendcount}; };
  allgather(c, out, esize, chunk, segments_for(chunk, n, esize), 0);
}

}  // namespace hpu::comm
