// TCP ports on 127.0.0.1 for tests' rendezvous addresses.
#pragma once

#include <vector>

namespace hpu_test {

// `n` distinct ports that were free a moment ago. The kernel picks them, so
// they never land on a port another test or an outgoing connection holds at
// that moment (a port computed from the pid could).
std::vector<int> free_ports(int n);
inline int free_port() { return free_ports(1)[0]; }

}  // namespace hpu_test
