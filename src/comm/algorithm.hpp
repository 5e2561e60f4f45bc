// What the collective algorithms are written against: one operation's context
// (this rank's transport endpoint, the operation's header and tags, deadlines,
// scratch memory), and the algorithms themselves, one per file in
// src/comm/algorithms/. Algorithms see only the Transport interface and its
// capabilities (transports/capability.hpp), through Ctx.
//
// Conventions every algorithm keeps:
//   - deterministic: each element of a result is combined in an order fixed by
//     the rank count and the layout alone, by one rank, and copied from there;
//     combines of equal operands on two ranks use the same operand order. The
//     algorithms the rule picks (collectives.cpp) all combine in rank order
//     (combine_rank_order, reduce.hpp), so a result has the same bits over
//     every transport and layout; ring, tree, recursive doubling and
//     halving-doubling, which only HPU_ALGO picks, each have an order of their
//     own;
//   - a send's memory is not written until the send is done;
//   - the same message layout on every rank (empty pieces are skipped on both
//     sides), so tags pair up without any negotiation.
#pragma once

#include <hpu/comm.h>

#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <vector>

#include "comm/reduce.hpp"
#include "comm/transports/capability.hpp"

namespace hpu::comm {

// Host memory an operation may use, owned by the communicator and reused.
class Scratch {
 public:
  // At least `bytes` bytes of slot `slot` (0..kSlots-1), 64-byte aligned; the
  // contents are not kept across calls that grow it.
  void *get(int slot, size_t bytes);
  static constexpr int kSlots = 3;

 private:
  struct Free {
    void operator()(void *p) const { std::free(p); }
  };
  struct Block {
    std::unique_ptr<void, Free> mem;
    size_t bytes = 0;
  };
  Block slots_[kSlots];
};

class Ctx {
 public:
  Ctx(Transport &transport, const OpHeader &header, double timeout_seconds, Scratch &scratch);

  int rank() const { return rank_; }
  int size() const { return size_; }
  const OpHeader &header() const { return header_; }
  bool shares_address_space() const { return t_.shares_address_space(); }
  // True when the transport offers Chaining: the steps of `after` below go on
  // without the waiting thread, which may then wait once, at the end.
  bool chains() const { return chaining_ != nullptr; }
  // Throws the endpoint's sticky error (a peer failed or aborted), if any.
  void throw_if_failed() const { t_.throw_if_failed(); }

  // Messages of this operation. `step` (< 2^24) tells the messages of one
  // operation between one pair apart; the first message to each peer carries
  // the header. Each is posted once the requests of `after` are done (null
  // entries are skipped; Chaining, when the transport offers it, else after a
  // wait here): post a whole chain of steps, then wait once.
  RequestPtr send(int peer, uint32_t step, const void *data, size_t bytes, const std::vector<Request *> &after = {});
  RequestPtr recv(int peer, uint32_t step, void *data, size_t bytes, const Combine *combine = nullptr,
                  const std::vector<Request *> &after = {});

  // Waits with the communicator's deadline, counted from the call.
  void wait(std::initializer_list<Request *> requests);
  void wait(const std::vector<RequestPtr> &requests);
  void wait(const RequestPtr &r) { wait({r.get()}); }

  void *scratch(int slot, size_t bytes) { return scratch_.get(slot, bytes); }

  // The memory all ranks map (SharedMemory; base nullptr without it), and
  // waiting on it.
  SharedArea shared_area() const { return shared_ ? shared_->shared_area() : SharedArea{}; }
  void wake_peers() {
    if (shared_) shared_->wake_peers();
  }
  void wait_until(const std::function<bool()> &ready, const std::function<std::string()> &what) {
    t_.wait_until(ready, deadline(), what);
  }
  // Fails the operation on every rank (Transport::fail_all) and throws.
  [[noreturn]] void fail_all(hpuStatus_t status, const std::string &message);

 private:
  Deadline deadline() const;

  Transport &t_;
  Chaining *chaining_;
  SharedMemory *shared_;
  OpHeader header_;
  int rank_, size_;
  double timeout_;
  Scratch &scratch_;
  std::vector<bool> header_sent_;  // per peer; sized at the first send (shared-area calls send none)
};

// Elements [begin, begin + count) of a buffer split into `parts` nearly equal
// pieces: piece i.
struct Piece {
  size_t begin, count;
};
inline Piece split(size_t count, size_t parts, size_t i) {
  size_t base = count / parts, extra = count % parts;
  return {i * base + (i < extra ? i : extra), base + (i < extra ? 1 : 0)};
}

// Pipelining: messages of at most this many bytes, so that a rank forwards the
// first piece while the next is still on its way.
constexpr size_t kSegmentBytes = size_t(1) << 20;

inline int mod(int a, int n) { return ((a % n) + n) % n; }

// ---- algorithms ------------------------------------------------------------
// Counts are elements of `dtype`; the caller has checked the arguments, and
// calls only with size() > 1 and count > 0.

// ring.cpp: reduce-scatter and allgather around the ring, pipelined in segments.
void ring_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op);
void ring_reducescatter(Ctx &c, const void *send, void *recv, size_t recvcount, hpuDataType_t dtype, hpuRedOp_t op);
void ring_allgather(Ctx &c, const void *send, void *recv, size_t sendcount, hpuDataType_t dtype);

// recursive_doubling.cpp: log2(n) exchanges of the whole buffer (small messages).
void recursive_doubling_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype,
                                  hpuRedOp_t op);

// halving_doubling.cpp: recursive halving reduce-scatter, then recursive
// doubling allgather (the ring's bytes in 2 log2(n) steps).
void halving_doubling_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype,
                                hpuRedOp_t op);

// direct.cpp: each rank does its share straight between the ranks' buffers
// (ranks that share an address space only).
void direct_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op);
void direct_reducescatter(Ctx &c, const void *send, void *recv, size_t recvcount, hpuDataType_t dtype,
                          hpuRedOp_t op);
void direct_allgather(Ctx &c, const void *send, void *recv, size_t sendcount, hpuDataType_t dtype);
void direct_broadcast(Ctx &c, const void *send, void *recv, size_t bytes, int root);

// tree.cpp: binomial trees (small messages; also allreduce as reduce + broadcast).
void tree_broadcast(Ctx &c, const void *send, void *recv, size_t bytes, int root);
void tree_reduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op, int root);

// chain.cpp: pipelined chains from or to the root (large messages).
void chain_broadcast(Ctx &c, const void *send, void *recv, size_t bytes, int root);
void chain_reduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op, int root);

// pairwise.cpp: every rank sends each peer its block directly.
void pairwise_alltoall(Ctx &c, const void *send, void *recv, size_t bytes_per_rank);
// The reductions in rank order (combine_rank_order), whatever the transport:
// rank q owns piece q of the elements, receives every rank's contribution to
// it in one step and combines them; allreduce then sends each piece to every
// rank, reduce to the root (the ring's bytes in two steps).
void pairwise_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op);
void pairwise_reduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op,
                     int root);
void pairwise_reducescatter(Ctx &c, const void *send, void *recv, size_t recvcount, hpuDataType_t dtype,
                            hpuRedOp_t op);
// Small messages: every rank that needs the result (all, or the root) gets
// every input and combines them in rank order (one step); between processes
// on more than 2 ranks the allreduce's rank 0 alone does, and sends the
// result to every rank (two steps, 2(n - 1) messages instead of n(n - 1)).
void gather_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op);
void gather_reduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op, int root);

// shared_memory.cpp: ranks that map one area (Ctx::shared_area) meet there.
// Up to 16 KiB each deposits its input; on up to 4 ranks each then combines
// all inputs itself, on more the last to arrive combines them and every rank
// copies the result out. Larger allreduces go chunk by chunk: each rank
// combines its piece of every input and copies the others' pieces out.
// Rank order in every case. shared_allreduce_fits says
// whether `bytes` go through the area (false without one); the area n ranks
// need is shared_area_bytes(n) (capability.hpp).
bool shared_allreduce_fits(const Ctx &c, size_t bytes);
// Says which call this rank runs, for the mismatch check of ranks waiting in
// the area; every collective calls it first (nothing without an area).
void shared_announce(const Ctx &c);
void shared_allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op);

// dissemination.cpp: ceil(log2(n)) rounds of empty messages.
void dissemination_barrier(Ctx &c);

}  // namespace hpu::comm
