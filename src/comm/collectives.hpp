// The collectives as operations of a group: which algorithm runs (a rule on
// size and rank count; HPU_ALGO forces one where it applies) and the cases
// every algorithm leaves out (one rank, nothing to move).
//
// The reductions the rule picks all combine in rank order, so that their bits
// do not depend on the layout (combine_rank_order, reduce.hpp); HPU_ALGO's
// ring, tree, recursive_doubling and halving_doubling have orders of their own.
//
//   allreduce       ranks that are threads of one process: direct when the n
//                   ranks' buffers together exceed kDirectMinBytes; ranks
//                   that map one shared area (processes of one host over
//                   shm): shared memory (on 2 ranks not from 16 to 46 KiB);
//                   otherwise every input to every rank (gather) up to
//                   kSmallBytes, else the pairwise exchange;
//                   HPU_ALGO=tree: binomial reduce then broadcast
//   broadcast       direct as allreduce; otherwise binomial tree up to
//                   kSmallBytes, else a pipelined chain
//   reduce          every input to the root (gather) up to kSmallBytes, else
//                   the pairwise exchange (HPU_ALGO=ring: a pipelined chain,
//                   tree: a binomial tree)
//   reducescatter   direct as allreduce, otherwise the pairwise exchange
//                   (HPU_ALGO=ring: the ring)
//   allgather       direct as allreduce, otherwise the ring
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
