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

// After it, chunk r of rank r is complete (at acc(n - 2, r)), once the last
// step's receives (`last`, per segment) are done. `reuse`: acc places are
// shared between steps, so a receive waits for the send that read the same
// place two steps before. Every step is chained after the one it needs
// (Ctx::send's `after`): all is posted at once, and `sends` gets the sends of
// each step (step * segs + segment), `all` every request, for the caller to
// wait for.
void reduce_scatter(Ctx &c, const char *send, size_t esize, hpuDataType_t dtype, hpuRedOp_t op, const ChunkFn &chunk,
                    size_t segs, const AccFn &acc, bool reuse, std::vector<RequestPtr> &sends,
                    std::vector<RequestPtr> &last, std::vector<RequestPtr> &all) {
  const int n = c.size(), r = c.rank(), right = mod(r + 1, n), left = mod(r - 1, n);
  sends.assign(static_cast<size_t>(n - 1) * segs, nullptr);
  std::vector<RequestPtr> recvs(static_cast<size_t>(n - 1) * segs);
  for (int s = 0; s < n - 1; ++s) {
    const int cs = mod(r - s - 1, n), cr = mod(r - s - 2, n);
    const Piece ps = chunk(cs), pr = chunk(cr);
    for (size_t j = 0; j < segs; ++j) {
      const size_t at = static_cast<size_t>(s) * segs + j, before = at - segs;  // this step, the one before
      const auto step = static_cast<uint32_t>(at);
      const Piece gs = split(ps.count, segs, j), gr = split(pr.count, segs, j);
      if (gs.count) {
        // From step 1 on, the partial of chunk cs that arrived at the step before.
        const char *from = s == 0 ? send + (ps.begin + gs.begin) * esize : acc(s - 1, cs) + gs.begin * esize;
        sends[at] = c.send(right, step, from, gs.count * esize, {s > 0 ? recvs[before].get() : nullptr});
        all.push_back(sends[at]);
      }
      if (gr.count) {
        Combine cb = make_combine(dtype, op, send + (pr.begin + gr.begin) * esize);
        recvs[at] = c.recv(left, step, acc(s, cr) + gr.begin * esize, gr.count * esize, &cb,
                           {reuse && s > 0 ? sends[before].get() : nullptr});
        all.push_back(recvs[at]);
      }
    }
  }
  last.assign(recvs.end() - static_cast<std::ptrdiff_t>(segs), recvs.end());
}

// Before it, rank r holds chunk r of `out` (once `ready`, per segment, are
// done); after it, every chunk. A receive into chunk r - s - 1 waits for
// `readers`[s * segs + segment] (a reduce-scatter's send from there, if any).
// Chained like reduce_scatter; `all` gets every request.
void allgather(Ctx &c, char *out, size_t esize, const ChunkFn &chunk, size_t segs, uint32_t step0,
               const std::vector<RequestPtr> &ready, const std::vector<RequestPtr> &readers,
               std::vector<RequestPtr> &all) {
  const int n = c.size(), r = c.rank(), right = mod(r + 1, n), left = mod(r - 1, n);
  std::vector<RequestPtr> recvs(static_cast<size_t>(n - 1) * segs);
  for (int s = 0; s < n - 1; ++s) {
    const int cs = mod(r - s, n), cr = mod(r - s - 1, n);
    const Piece ps = chunk(cs), pr = chunk(cr);
    for (size_t j = 0; j < segs; ++j) {
      const size_t at = static_cast<size_t>(s) * segs + j;
      const auto step = step0 + static_cast<uint32_t>(at);
      const Piece gs = split(ps.count, segs, j), gr = split(pr.count, segs, j);
      if (gs.count) {
        Request *after = s > 0 ? recvs[at - segs].get() : ready.empty() ? nullptr : ready[j].get();
        all.push_back(c.send(right, step, out + (ps.begin + gs.begin) * esize, gs.count * esize, {after}));
      }
      if (gr.count) {
        recvs[at] = c.recv(left, step, out + (pr.begin + gr.begin) * esize, gr.count * esize, nullptr,
                           {readers.empty() ? nullptr : readers[at].get()});
        all.push_back(recvs[at]);
      }
    }
  }
}

}  // namespace

void ring_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op) {
  const int n = c.size();
  const size_t esize = dtype_bytes(dtype);
  auto *out = static_cast<char *>(recv);
  ChunkFn chunk = [&](int i) { return split(count, static_cast<size_t>(n), static_cast<size_t>(i)); };
  const size_t segs = segments_for(chunk, n, esize);
  std::vector<RequestPtr> sends, last, all;
  reduce_scatter(c, static_cast<const char *>(send), esize, dtype, op, chunk, segs,
                 [&](int, int i) { return out + chunk(i).begin * esize; }, false, sends, last, all);
  // Without chains the allgather would wait for its steps one at a time: all at once, as before.
  if (!c.chains()) c.wait(all);
  if (op == HPU_AVG) {  // the finished chunk is averaged here before it goes on
    c.wait(last);
    const Piece mine = chunk(c.rank());
    finish_average(out + mine.begin * esize, mine.count, dtype, op, n);
  }
  allgather(c, out, esize, chunk, segs, static_cast<uint32_t>(static_cast<size_t>(n - 1) * segs), last, sends, all);
  c.wait(all);
}

void ring_reducescatter(Ctx &c, const void *send, void *recv, size_t recvcount, hpuDataType_t dtype, hpuRedOp_t op) {
  const int n = c.size();
  const size_t esize = dtype_bytes(dtype), bytes = recvcount * esize;
  ChunkFn chunk = [&](int i) { return Piece{static_cast<size_t>(i) * recvcount, recvcount}; };
  const size_t segs = segments_for(chunk, n, esize);
  char *slots[2] = {static_cast<char *>(c.scratch(0, bytes)), static_cast<char *>(c.scratch(1, bytes))};
  std::vector<RequestPtr> sends, last, all;
  reduce_scatter(c, static_cast<const char *>(send), esize, dtype, op, chunk, segs,
                 [&](int step, int) { return step == n - 2 ? static_cast<char *>(recv) : slots[step % 2]; }, true,
                 sends, last, all);
  c.wait(all);
  finish_average(recv, recvcount, dtype, op, n);
}

void ring_allgather(Ctx &c, const void *send, void *recv, size_t sendcount, hpuDataType_t dtype) {
  const int n = c.size();
  const size_t esize = dtype_bytes(dtype);
  auto *out = static_cast<char *>(recv);
  char *mine = out + static_cast<size_t>(c.rank()) * sendcount * esize;
  if (mine != send) std::memcpy(mine, send, sendcount * esize);
  ChunkFn chunk = [&](int i) { return Piece{static_cast<size_t>(i) * sendcount, sendcount}; };
  std::vector<RequestPtr> all;
  allgather(c, out, esize, chunk, segments_for(chunk, n, esize), 0, {}, {}, all);
  c.wait(all);
}

}  // namespace hpu::comm
