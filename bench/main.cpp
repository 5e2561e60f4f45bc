// hpu-bench: benchmarks that print tables with the ratio to a peer measured in
// the same run. `hpu-bench` alone lists the subcommands.
#include <cstring>

#include "bench.hpp"

namespace bench {
std::vector<Command> &commands() {
  static std::vector<Command> list;
  return list;
}
}  // namespace bench

int main(int argc, char **argv) {
  auto &cmds = bench::commands();
  if (argc >= 2) {
    for (const auto &c : cmds)
      if (std::strcmp(argv[1], c.name) == 0) return c.main(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "usage: hpu-bench COMMAND [options]\n\ncommands:\n");
  for (const auto &c : cmds) std::fprintf(stderr, "  %-14s %s\n", c.name, c.help);
  return argc >= 2 ? 2 : 0;
}
