// Runs a piece of a test in a forked child with its own environment, before
// the library initialises in that child; returns its exit code and stderr.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace hpu_test {

struct ChildResult {
  int exit_code = -1;   // the body's return value, or 128 + signal
  std::string output;   // what the child wrote to stderr
};

using Env = std::vector<std::pair<std::string, std::string>>;

// The body must not have been preceded by any libhpu call in this process.
ChildResult run_child(const Env &env, const std::function<int()> &body);

}  // namespace hpu_test
