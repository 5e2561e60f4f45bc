// Capabilities: what some transports can do beyond the messages of the
// Transport interface, each an interface of its own that the generic
// Transport does not know. A transport offers one by answering
// Transport::find<C>() (find_capability); an algorithm asks for it (Ctx asks
// once per operation) and takes another path when it is not offered.
//
//   Chaining      net over tcp: steps posted up front, each posted by the
//                 thread that completes the steps it follows
//   SharedMemory  net over shm, every rank on this host: an area every rank
//                 maps, where algorithms may meet instead of exchanging
//                 messages (algorithms/shared_memory.cpp)
//
// A new capability: an interface here, find_capability in the transports that
// offer it, and the question in Ctx (algorithm.hpp).
#pragma once

#include <vector>

#include "comm/transports/transport.hpp"

namespace hpu::comm {

// isend/irecv posted once every request of `after` is done (null entries are
// skipped), from the thread that completes the last of them: an algorithm
// posts a chain of steps up front and waits once, at the end, and the steps go
// on without waking the waiting thread (a transport whose messages move on
// threads of its own). If one of `after` fails, the endpoint fails (the
// request itself never completes). Without it Ctx waits for `after`, then
// posts.
class Chaining {
 public:
  virtual RequestPtr isend_after(const SendDesc &desc, const std::vector<Request *> &after) = 0;
  virtual RequestPtr irecv_after(const RecvDesc &desc, const std::vector<Request *> &after) = 0;

 protected:
  ~Chaining() = default;
};

// Memory every rank of the group maps, each at its own address: the same
// bytes for all, zero at first. The same answer on every rank of the group.
struct SharedArea {
  void *base = nullptr;  // nullptr: there is none
  size_t bytes = 0;
};

// The bytes of area a group of n ranks needs (algorithms/shared_memory.cpp
// defines it): a transport offers SharedMemory with at least this much.
size_t shared_area_bytes(int n);

class SharedMemory {
 public:
  virtual SharedArea shared_area() const = 0;
  // Wakes the peers' threads in Transport::wait_until, after this rank wrote
  // the area.
  virtual void wake_peers() = 0;

 protected:
  ~SharedMemory() = default;
};

}  // namespace hpu::comm
