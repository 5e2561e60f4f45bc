// The collectives as operations of a group: which algorithm runs (a rule on
// size and rank count; HPU_ALGO forces one where it applies) and the cases
// every algorithm leaves out (one rank, nothing to move).
//
//   allreduce       ranks that are threads of one process: direct when the n
//                   ranks' buffers together exceed kDirectMinBytes; ranks
//                   that map one shared area (processes of one host over
//                   shm): shared memory up to 16 KiB; otherwise
//                   recursive doubling up to kSmallBytes, else the ring
//                   (halving-doubling on 4, 8, ... ranks up to the
//                   transport's few_steps_bytes);
//                   HPU_ALGO=tree: binomial reduce then broadcast
//   broadcast       direct as allreduce; otherwise binomial tree up to
//                   kSmallBytes, else a pipelined chain
//   reduce          binomial tree up to kSmallBytes, else a pipelined chain
//                   (HPU_ALGO=ring means the chain, tree the tree)
//   allgather, reducescatter   direct as allreduce, otherwise the ring
//   alltoall        pairwise exchange
//   barrier         dissemination
//
// A new collective: a row in wire.hpp's HPU_COMM_CALLS, its rule in
// collectives.cpp (a function and a case in run()), and where no algorithm
// fits, one in algorithms/ (declared in algorithm.hpp).
#pragma once

#include <string>

#include "comm/algorithm.hpp"

namespace hpu::comm {

// Whether `name` is a value of HPU_ALGO (comm.algo); the values, joined by ", ".
bool algo_known(const std::string &name);
std::string algo_names();

// The collective that c.header() names (kind, count, data type, operation,
// root), on these buffers: what an operation queued by the API runs.
void run(Ctx &c, const void *send, void *recv);

}  // namespace hpu::comm
