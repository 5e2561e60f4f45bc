// What a call of the group is, on the wire: the kinds of collectives (one
// table: adding a collective adds a row here), and the header each
// operation's first frame to a peer carries, which the transports check
// against the call the receiving rank runs (header_mismatch).
#pragma once

#include <cstdint>
#include <string>

namespace hpu::comm {

// X(name, number, has_root, has_redop): every call a header can name. The
// numbers travel in headers: fixed forever, new ones appended.
#define HPU_COMM_CALLS(X)             \
  X(none, 0, false, false)            \
  X(allreduce, 1, false, true)        \
  X(broadcast, 2, true, false)        \
  X(reduce, 3, true, true)            \
  X(allgather, 4, false, false)       \
  X(reducescatter, 5, false, true)    \
  X(alltoall, 6, false, false)        \
  X(barrier, 7, false, false)         \
  X(send, 8, false, false) /* point to point: the header travels with each message */ \
  X(recv, 9, false, false)

enum class CollKind : uint32_t {
#define HPU_COMM_CALL_(name, number, root, redop) name = number,
  HPU_COMM_CALLS(HPU_COMM_CALL_)
#undef HPU_COMM_CALL_
};
// "allreduce"; "?" for a number that is no call.
const char *coll_name(CollKind kind);

// The first frame of each operation to each peer carries this (fixed layout: it
// goes on the wire as it is, little-endian).
struct OpHeader {
  uint64_t seq = 0;    // collectives: 1, 2, ... per communicator; p2p: per (sender, receiver) pair
  uint32_t coll = 0;   // CollKind
  uint32_t dtype = 0;  // hpuDataType_t
  uint64_t count = 0;  // elements, as the caller passed them
  int32_t root = -1;   // root rank; for point to point the sending rank; -1 if none
  uint32_t redop = 0;  // hpuRedOp_t, 0 when the collective has none
};
static_assert(sizeof(OpHeader) == 32, "OpHeader is a wire format");

// True for the collectives (not none, send or recv).
bool is_collective(const OpHeader &h);

// "allreduce #7 (count 1024, bf16, sum)" for messages.
std::string describe(const OpHeader &h);

// "" when `theirs` (sent by rank `peer`) matches `mine` (running on rank
// `self`), else the message of the HPU_ERROR_INVALID_USAGE to fail with, naming
// both ranks and both calls. For point to point a send matches a receive of
// the same sequence, count and type.
std::string header_mismatch(const OpHeader &mine, int self, const OpHeader &theirs, int peer);

}  // namespace hpu::comm
