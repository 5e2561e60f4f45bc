// hpu-bench: benchmarks that print tables with the ratio to a peer measured in
// the same run. `hpu-bench` alone lists the subcommands.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "bench.hpp"

namespace bench {

std::vector<Command> &commands() {
  static std::vector<Command> list;
  return list;
}

int in_child_per_thread_count(const std::vector<int> &thread_counts, const std::function<int(int threads)> &run) {
  int misses = 0;
  for (int t : thread_counts) {
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      setenv("HPU_NUM_THREADS", std::to_string(t).c_str(), 1);
      int child_misses = run(t);
      std::fflush(stdout);  // _exit does not flush
      _exit(std::min(child_misses, 100));
    }
    int status = 0;
    waitpid(pid, &status, 0);
    misses += WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  return misses;
}

std::string python_output(const char *name, const char *script, const std::string &args) {
  if (access("/usr/bin/python3", X_OK) != 0) return "";
  const std::string path = std::string("/tmp/hpu-bench-") + name + ".py";
  FILE *f = std::fopen(path.c_str(), "w");
  if (!f) return "";
  std::fputs(script, f);
  std::fclose(f);
  FILE *p = popen(("/usr/bin/python3 " + path + " " + args + " 2>/dev/null").c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? out : "";
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
