// Which algorithm each collective runs, and the cases every algorithm leaves out.
#include "comm/collectives.hpp"

#include <cstring>

#include "core/error.hpp"
#include "core/runtime.hpp"

namespace hpu::comm {

namespace {

// The rule's algorithms all combine in rank order (combine_rank_order,
// reduce.hpp), so that a reduction gives the same bits whether the ranks are
// threads, processes or hosts, and over any mixture of transports: direct
// between threads, the shared area between processes of one host, else the
// pairwise exchange. Ring, tree, recursive doubling and halving-doubling have
// orders of their own (each element's partial sums follow the ring or the
// tree), so only HPU_ALGO picks them.
//
// Up to this size the algorithms of few, whole-buffer steps (gather, trees);
// above it those that split the buffer (pairwise, chain).
constexpr size_t kSmallBytes = size_t(64) << 10;
// Collectives between threads of one process go direct when the buffers of all
// ranks together are larger than this (below, fewer messages win).
constexpr size_t kDirectMinBytes = size_t(128) << 10;

enum class Algo { rule, ring, tree, recursive_doubling, halving_doubling, direct, pairwise, shared, gather };

// HPU_ALGO's values.
const struct {
  const char *name;
  Algo algo;
} kForcible[] = {{"ring", Algo::ring},
                 {"tree", Algo::tree},
                 {"recursive_doubling", Algo::recursive_doubling},
                 {"halving_doubling", Algo::halving_doubling},
                 {"direct", Algo::direct},
                 {"pairwise", Algo::pairwise}};

Algo forced() {
  const std::string &a = config().comm.algo;
  for (const auto &f : kForcible)
    if (a == f.name) return f.algo;
  return Algo::rule;
}

void copy(void *dst, const void *src, size_t bytes) {
  if (dst != src && bytes) std::memcpy(dst, src, bytes);
}

// Direct between threads of one process: when forced, or by the rule when the
// buffers of all ranks together are larger than kDirectMinBytes.
bool go_direct(const Ctx &c, Algo a, size_t all_bytes) {
  return c.shares_address_space() && (a == Algo::direct || (a == Algo::rule && all_bytes > kDirectMinBytes));
}

void allreduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op) {
  const size_t bytes = count * dtype_bytes(dtype);
  if (c.size() == 1 || count == 0) return copy(recv, send, bytes);
  Algo a = forced();
  if (go_direct(c, a, bytes * static_cast<size_t>(c.size()))) {
    a = Algo::direct;
  } else if ((a == Algo::rule || a == Algo::direct) && shared_allreduce_fits(c, bytes)) {
    a = Algo::shared;
  } else if (a == Algo::rule || a == Algo::direct) {
    a = bytes <= kSmallBytes ? Algo::gather : Algo::pairwise;
  }
  switch (a) {
    case Algo::direct:
      return direct_allreduce(c, send, recv, count, dtype, op);
    case Algo::shared:
      return shared_allreduce(c, send, recv, count, dtype, op);
    case Algo::gather:
      return gather_allreduce(c, send, recv, count, dtype, op);
    case Algo::pairwise:
      return pairwise_allreduce(c, send, recv, count, dtype, op);
    case Algo::ring:
      return ring_allreduce(c, send, recv, count, dtype, op);
    case Algo::recursive_doubling:
      return recursive_doubling_allreduce(c, send, recv, count, dtype, op);
    case Algo::halving_doubling:
      return halving_doubling_allreduce(c, send, recv, count, dtype, op);
    case Algo::tree:
      tree_reduce(c, send, recv, count, dtype, op, 0);
      return tree_broadcast(c, recv, recv, bytes, 0);
    default:
      fail(HPU_ERROR_INTERNAL, "allreduce: no algorithm chosen");
  }
}

void broadcast(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, int root) {
  const size_t bytes = count * dtype_bytes(dtype);
  if (c.size() == 1 || count == 0) return copy(recv, send, bytes);
  Algo a = forced();
  if (go_direct(c, a, bytes * static_cast<size_t>(c.size()))) return direct_broadcast(c, send, recv, bytes, root);
  if (a == Algo::tree || (a != Algo::ring && bytes <= kSmallBytes)) return tree_broadcast(c, send, recv, bytes, root);
  chain_broadcast(c, send, recv, bytes, root);
}

void reduce(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype, hpuRedOp_t op, int root) {
  const size_t bytes = count * dtype_bytes(dtype);
  if (c.size() == 1 || count == 0) return copy(recv, send, bytes);
  const Algo a = forced();
  if (a == Algo::tree) return tree_reduce(c, send, recv, count, dtype, op, root);
  if (a == Algo::ring) return chain_reduce(c, send, recv, count, dtype, op, root);
  if (a != Algo::pairwise && bytes <= kSmallBytes) return gather_reduce(c, send, recv, count, dtype, op, root);
  pairwise_reduce(c, send, recv, count, dtype, op, root);
}

void allgather(Ctx &c, const void *send, void *recv, size_t sendcount, hpuDataType_t dtype) {
  const size_t bytes = sendcount * dtype_bytes(dtype);
  if (c.size() == 1 || sendcount == 0) return copy(recv, send, bytes);
  if (go_direct(c, forced(), bytes * static_cast<size_t>(c.size()))) return direct_allgather(c, send, recv, sendcount, dtype);
  ring_allgather(c, send, recv, sendcount, dtype);
}

void reducescatter(Ctx &c, const void *send, void *recv, size_t recvcount, hpuDataType_t dtype, hpuRedOp_t op) {
  const size_t bytes = recvcount * dtype_bytes(dtype);
  if (c.size() == 1 || recvcount == 0) return copy(recv, send, bytes);
  const Algo a = forced();
  if (go_direct(c, a, bytes * static_cast<size_t>(c.size())))
    return direct_reducescatter(c, send, recv, recvcount, dtype, op);
  if (a == Algo::ring) return ring_reducescatter(c, send, recv, recvcount, dtype, op);
  pairwise_reducescatter(c, send, recv, recvcount, dtype, op);
}

void alltoall(Ctx &c, const void *send, void *recv, size_t count, hpuDataType_t dtype) {
  if (c.size() == 1 || count == 0) return copy(recv, send, count * dtype_bytes(dtype));
  pairwise_alltoall(c, send, recv, count * dtype_bytes(dtype));
}

void barrier(Ctx &c) {
  if (c.size() > 1) dissemination_barrier(c);
}

}  // namespace

bool algo_known(const std::string &name) {
  for (const auto &f : kForcible)
    if (name == f.name) return true;
  return false;
}

std::string algo_names() {
  std::string s;
  for (const auto &f : kForcible) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

void run(Ctx &c, const void *send, void *recv) {
  shared_announce(c);
  const OpHeader &h = c.header();
  const auto dtype = static_cast<hpuDataType_t>(h.dtype);
  const auto op = static_cast<hpuRedOp_t>(h.redop);
  switch (static_cast<CollKind>(h.coll)) {
    case CollKind::allreduce: return allreduce(c, send, recv, h.count, dtype, op);
    case CollKind::broadcast: return broadcast(c, send, recv, h.count, dtype, h.root);
    case CollKind::reduce: return reduce(c, send, recv, h.count, dtype, op, h.root);
    case CollKind::allgather: return allgather(c, send, recv, h.count, dtype);
    case CollKind::reducescatter: return reducescatter(c, send, recv, h.count, dtype, op);
    case CollKind::alltoall: return alltoall(c, send, recv, h.count, dtype);
    case CollKind::barrier: return barrier(c);
    default: fail(HPU_ERROR_INTERNAL, "%s is not a collective", describe(h).c_str());
  }
}

}  // namespace hpu::comm
