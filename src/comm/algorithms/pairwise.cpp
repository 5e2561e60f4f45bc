// Pairwise exchange: every rank sends each peer its part directly, all at
// once (rank r sends to r + k while it receives from r - k).
//   - all-to-all: each pair moves its block in one message;
//   - the reductions in rank order (combine_rank_order, reduce.hpp), the
//     order of every layout: rank q owns a piece of the elements, every rank
//     sends each owner its contribution to that piece, and the owner combines
//     the n contributions in rank order (a reduce-scatter that moves the
//     ring's bytes in one step instead of n - 1); allreduce then sends every
//     owner's result to every rank (an allgather, again in one step), reduce
//     to the root. Small messages (gather_*) skip the second step: every rank
//     that needs the result owns the whole buffer and gets every input.
// Pieces go in segments of at most kSegmentBytes, so that an owner sends the
// result of one segment while the next is still arriving.
#include <algorithm>
#include <cstring>
#include <functional>

#include "comm/algorithm.hpp"

namespace hpu::comm {

namespace {

// The steps of the results' messages, after every contribution's.
constexpr uint32_t kResultStep = 1u << 23;
// An owner combines this many bytes at a time through a buffer (scratch slot
// 1), so that its output may be its own input (in place).
constexpr size_t kBlockBytes = size_t(8) << 10;

size_t segments_of(size_t count, size_t esize) {
  size_t k = (count * esize + kSegmentBytes - 1) / kSegmentBytes;
  return k == 0 ? 1 : k;
}

using PieceFn = std::function<Piece(int rank)>;

// The contributions to this rank's piece: posting them (the constructor)
// sends every peer q the elements piece(q) of this rank's input (pieces may
// overlap or be empty) and receives the peers' contributions to piece(rank)
// into scratch slot 0; combine(j) then waits for segment j of them and
// combines the n values in rank order.
class Contributions {
 public:
  Contributions(Ctx &c, const void *send, hpuDataType_t dtype, const PieceFn &piece)
      : c_(c), send_(static_cast<const char *>(send)), dtype_(dtype), esize_(dtype_bytes(dtype)),
        mine_(piece(c.rank())), segs_(segments_of(mine_.count, esize_)), in_(static_cast<size_t>(c.size())),
        sent_(static_cast<size_t>(c.size())) {
    const int n = c.size(), r = c.rank();
    const size_t stride = mine_.count * esize_;
    if (mine_.count) {  // receives first, so that the data lands in place
      char *from = static_cast<char *>(c.scratch(0, stride * static_cast<size_t>(n - 1)));
      for (int k = 1; k < n; ++k) {
        const int q = mod(r - k, n);
        const size_t at = static_cast<size_t>(q < r ? q : q - 1) * stride;
        in_[static_cast<size_t>(q)] = from + at;
        for (size_t j = 0; j < segs_; ++j) {
          const Piece g = split(mine_.count, segs_, j);
          received_.push_back(c.recv(q, static_cast<uint32_t>(j), from + at + g.begin * esize_, g.count * esize_));
        }
      }
    }
    for (int k = 1; k < n; ++k) {
      const int q = mod(r + k, n);
      const Piece p = piece(q);
      if (!p.count) continue;
      const size_t segs = segments_of(p.count, esize_);
      for (size_t j = 0; j < segs; ++j) {
        const Piece g = split(p.count, segs, j);
        sent_[static_cast<size_t>(q)].push_back(
            c.send(q, static_cast<uint32_t>(j), send_ + (p.begin + g.begin) * esize_, g.count * esize_));
      }
    }
    in_[static_cast<size_t>(r)] = send_ + mine_.begin * esize_;
  }

  const Piece &mine() const { return mine_; }
  size_t segments() const { return segs_; }

  // Waits for segment j's contributions and combines them in rank order (and
  // averages), into `out` (element e of this rank's piece at out + e * the
  // element size; `out` may be this rank's input). Its elements within the piece.
  Piece combine(size_t j, char *out, hpuRedOp_t op) {
    const int n = c_.size();
    const Piece g = split(mine_.count, segs_, j);
    for (size_t k = 0; k + 1 < static_cast<size_t>(n); ++k) c_.wait(received_[k * segs_ + j]);
    const Combine cb = make_combine(dtype_, op, nullptr, /*local_first=*/true);
    char *acc = static_cast<char *>(c_.scratch(1, kBlockBytes));
    std::vector<const char *> in(in_.size());
    const size_t per_block = kBlockBytes / esize_;
    for (size_t b = g.begin; b < g.begin + g.count; b += per_block) {
      const size_t m = std::min(per_block, g.begin + g.count - b);
      for (size_t q = 0; q < in.size(); ++q) in[q] = in_[q] + b * esize_;
      combine_rank_order(cb, in.data(), n, acc, m);
      finish_average(acc, m, dtype_, op, n);
      std::memcpy(out + b * esize_, acc, m * esize_);
    }
    return g;
  }

  // The send of segment j of peer q's piece (nullptr if none): what a receive
  // into the same place waits for.
  Request *sent(int q, size_t j) const {
    const auto &s = sent_[static_cast<size_t>(q)];
    return j < s.size() ? s[j].get() : nullptr;
  }
  void wait_sent() {
    for (const auto &s : sent_) c_.wait(s);
  }

 private:
  Ctx &c_;
  const char *send_;
  hpuDataType_t dtype_;
  size_t esize_;
  Piece mine_;
  size_t segs_;
  std::vector<const char *> in_;              // each rank's contribution to this rank's piece
  std::vector<RequestPtr> received_;          // per peer (in order r - 1, r - 2, ...) and segment
  std::vector<std::vector<RequestPtr>> sent_;  // per peer and segment
};

// The owners' results to the ranks that need them: `to_all` (allreduce) or
// only `root` (reduce). `out` is where the results go (element e of the
// buffer at out + e * the element size) on the ranks that get them; `mine` where this rank
// combines its own piece. In place, a result lands where this rank's
// contribution to it was sent from: its receive waits for that send.
void exchange_results(Ctx &c, Contributions &x, const PieceFn &piece, size_t esize, char *out, char *mine, bool in_place,
                      bool to_all, int root, hpuRedOp_t op) {
  const int n = c.size(), r = c.rank();
  const bool receives = to_all || r == root;
  std::vector<RequestPtr> all;
  if (receives)
    for (int k = 1; k < n; ++k) {
      const int q = mod(r - k, n);
      const Piece p = piece(q);
      if (!p.count) continue;
      const size_t segs = segments_of(p.count, esize);
      for (size_t j = 0; j < segs; ++j) {
        const Piece g = split(p.count, segs, j);
        all.push_back(c.recv(q, kResultStep + static_cast<uint32_t>(j), out + (p.begin + g.begin) * esize,
                             g.count * esize, nullptr, {in_place ? x.sent(q, j) : nullptr}));
      }
    }
  const Piece own = x.mine();
  for (size_t j = 0; own.count && j < x.segments(); ++j) {
    const Piece g = x.combine(j, mine, op);
    for (int k = 1; k < n; ++k) {
      const int q = mod(r + k, n);
      if (to_all || q == root)
        all.push_back(c.send(q, kResultStep + static_cast<uint32_t>(j), mine + g.begin * esize, g.count * esize));
    }
  }
  c.wait(all);
  x.wait_sent();
}

}  // namespace

void pairwise_alltoall(Ctx &c, const void *send, void *recv, size_t bytes_per_rank) {
  const int n = c.size(), r = c.rank();
  const size_t b = bytes_per_rank;
  const char *src = static_cast<const char *>(send);
  if (send == recv) {  // in place: peers read the blocks from a copy
    char *copy = static_cast<char *>(c.scratch(0, b * static_cast<size_t>(n)));
    std::memcpy(copy, send, b * static_cast<size_t>(n));
    src = copy;
  }
  auto *out = static_cast<char *>(recv);
  std::vector<RequestPtr> all;
  for (int k = 1; k < n; ++k) {
    const int to = mod(r + k, n), from = mod(r - k, n);
    all.push_back(c.recv(from, 0, out + static_cast<size_t>(from) * b, b));
    all.push_back(c.send(to, 0, src + static_cast<size_t>(to) * b, b));
  }
  if (src + static_cast<size_t>(r) * b != out + static_cast<size_t>(r) * b)
    std::memcpy(out + static_cast<size_t>(r) * b, src + static_cast<size_t>(r) * b, b);
  c.wait(all);
}

void pairwise_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op) {
  const auto n = static_cast<size_t>(c.size());
  const size_t esize = dtype_bytes(dtype);
  PieceFn piece = [&](int q) { return split(count, n, static_cast<size_t>(q)); };
  Contributions x(c, send, dtype, piece);
  auto *out = static_cast<char *>(recv);
  exchange_results(c, x, piece, esize, out, out + x.mine().begin * esize, send == recv, true, -1, op);
}

void pairwise_reduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op,
                     int root) {
  const auto n = static_cast<size_t>(c.size());
  const size_t esize = dtype_bytes(dtype);
  PieceFn piece = [&](int q) { return split(count, n, static_cast<size_t>(q)); };
  Contributions x(c, send, dtype, piece);
  auto *out = static_cast<char *>(recv);
  char *mine = c.rank() == root ? out + x.mine().begin * esize
                                : static_cast<char *>(c.scratch(2, x.mine().count * esize));
  exchange_results(c, x, piece, esize, out, mine, send == recv, false, root, op);
}

void pairwise_reducescatter(Ctx &c, const void *send, void *recv, size_t recvcount, hpuDataType_t dtype,
                            hpuRedOp_t op) {
  Contributions x(c, send, dtype, [&](int q) { return Piece{static_cast<size_t>(q) * recvcount, recvcount}; });
  for (size_t j = 0; j < x.segments(); ++j) x.combine(j, static_cast<char *>(recv), op);
  x.wait_sent();
}

// gather_allreduce with the inputs combined as they land, in rank order, by
// the receives (on the transport's threads where it chains, so the waiting
// thread wakes once, when the result is there). On 2 ranks each receives the
// other's input (one step; the messages of the general path). On more, rank 0
// alone receives every input, each receive (posted once the one before it is
// done) combining one rank's input into the sum of the ranks before it, and
// sends the result to every rank: 2(n - 1) messages instead of n(n - 1), in
// two steps instead of one. With more ranks than CPUs the messages' system
// calls and wake-ups, not the steps, take the time. In place, a rank's result
// overwrites its input only once it is sent.
void arrival_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op) {
  const int n = c.size(), r = c.rank();
  const size_t bytes = count * dtype_bytes(dtype);
  constexpr uint32_t kResultStep = 1;
  std::vector<RequestPtr> all;
  if (n == 2 || r != 0) {
    const int from = n == 2 ? 1 - r : 0;
    all.push_back(c.send(from, 0, send, bytes));
    Request *sent = send == recv ? all.back().get() : nullptr;
    const Combine other = make_combine(dtype, op, send, /*local_first=*/r == 0);
    all.push_back(n == 2 ? c.recv(from, 0, recv, bytes, &other, {sent})
                         : c.recv(0, kResultStep, recv, bytes, nullptr, {sent}));
  } else {
    const Combine first = make_combine(dtype, op, send, /*local_first=*/true);
    const Combine onto_sum = make_combine(dtype, op, recv, /*local_first=*/true);
    for (int q = 1; q < n; ++q)
      all.push_back(c.recv(q, 0, recv, bytes, q == 1 ? &first : &onto_sum, {q == 1 ? nullptr : all.back().get()}));
    Request *sum = all.back().get();
    for (int q = 1; q < n; ++q) all.push_back(c.send(q, kResultStep, recv, bytes, {sum}));
  }
  c.wait(all);
  finish_average(recv, count, dtype, op, n);  // (rank 0 sends the sum: each rank averages it alike)
}

void gather_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op) {
  // Every rank takes the same branch: the group shares an address space or
  // not, and the two-rank exchange moves the messages of the path below.
  if (c.size() == 2 ? c.chains() : !c.shares_address_space())
    return arrival_allreduce(c, send, recv, count, dtype, op);
  Contributions x(c, send, dtype, [&](int) { return Piece{0, count}; });
  if (send == recv) x.wait_sent();  // in place: the result overwrites what the peers were sent
  for (size_t j = 0; j < x.segments(); ++j) x.combine(j, static_cast<char *>(recv), op);
  x.wait_sent();
}

void gather_reduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op,
                   int root) {
  Contributions x(c, send, dtype, [&](int q) { return Piece{0, q == root ? count : 0}; });
  for (size_t j = 0; x.mine().count && j < x.segments(); ++j) x.combine(j, static_cast<char *>(recv), op);
  x.wait_sent();
}

}  // namespace hpu::comm
