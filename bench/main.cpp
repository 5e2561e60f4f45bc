// hpu-bench: benchmarks that print tables with the ratio to a peer measured in
// the same run. `hpu-bench` alone lists the subcommands.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
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

int in_children_taking_turns(const std::vector<int> &thread_counts, const std::vector<int> &turns,
                             const std::function<void(int threads, int step)> &run) {
  // The parent's end of a socket pair per child: a byte down it starts the
  // child's next step, a byte back says the step is done, closing it ends the
  // child. (A socket rather than pipes: sending to a child that died fails
  // with EPIPE under MSG_NOSIGNAL instead of raising SIGPIPE.)
  struct Child {
    pid_t pid = -1;
    int fd = -1;
    size_t last_turn = 0;
  };
  std::vector<Child> children(thread_counts.size());
  for (size_t i = 0; i < turns.size(); ++i) children[static_cast<size_t>(turns[i])].last_turn = i;
  std::fflush(stdout);
  for (size_t c = 0; c < children.size(); ++c) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      std::perror("hpu-bench: socketpair");
      std::exit(1);
    }
    const pid_t pid = fork();
    if (pid == 0) {
      for (size_t o = 0; o < c; ++o) close(children[o].fd);
      close(fds[0]);
      setenv("HPU_NUM_THREADS", std::to_string(thread_counts[c]).c_str(), 1);
      char byte;
      for (int step = 0; recv(fds[1], &byte, 1, 0) == 1; ++step) {
        run(thread_counts[c], step);
        std::fflush(stdout);
        if (send(fds[1], &byte, 1, MSG_NOSIGNAL) != 1) break;
      }
      std::fflush(stdout);  // _exit does not flush
      _exit(0);
    }
    close(fds[1]);
    children[c].pid = pid;
    children[c].fd = fds[0];
  }
  int failed = 0;
  // Ends child c and waits for it; a child that did not exit with 0 failed.
  auto finish = [&](size_t c) {
    if (children[c].fd < 0) return;
    close(children[c].fd);
    children[c].fd = -1;
    int status = 0;
    waitpid(children[c].pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  };
  for (size_t i = 0; i < turns.size(); ++i) {
    const size_t c = static_cast<size_t>(turns[i]);
    if (children[c].fd < 0) continue;
    char byte = 1;
    const bool ran = send(children[c].fd, &byte, 1, MSG_NOSIGNAL) == 1 && recv(children[c].fd, &byte, 1, 0) == 1;
    if (!ran || i == children[c].last_turn) finish(c);
  }
  for (size_t c = 0; c < children.size(); ++c) finish(c);
  return failed;
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

std::string find_beside_self(const std::vector<std::string> &candidates, std::string *looked) {
  char buf[PATH_MAX];
  if (!realpath("/proc/self/exe", buf)) return "";
  const std::string self(buf), dir = self.substr(0, self.rfind('/'));
  for (const std::string &c : candidates) {
    const std::string path = dir + "/" + c;
    if (looked) *looked += (looked->empty() ? "" : " and ") + path;
    if (access(path.c_str(), R_OK) == 0 && realpath(path.c_str(), buf)) return buf;
  }
  return "";
}

}  // namespace bench

namespace {

bool is_help(const char *arg) { return !std::strcmp(arg, "-h") || !std::strcmp(arg, "--help"); }

// hpu-bench(1): -h or --help anywhere prints the usage on stdout and exits 0;
// an argument a command does not take prints its usage on stderr and exits 2.
int usage(const bench::Command &c, FILE *to) {
  std::fprintf(to, "usage: hpu-bench %s %s", c.name, c.usage);
  return to == stdout ? 0 : 2;
}

}  // namespace

int main(int argc, char **argv) {
  std::sort(bench::commands().begin(), bench::commands().end(),
            [](const bench::Command &a, const bench::Command &b) { return std::strcmp(a.name, b.name) < 0; });
  for (const auto &c : bench::commands()) {
    if (argc < 2 || std::strcmp(argv[1], c.name) != 0) continue;
    for (int i = 2; i < argc; ++i)
      if (is_help(argv[i])) return usage(c, stdout);
    const int rc = c.main(argc - 1, argv + 1);
    if (rc != bench::kBadUsage) return rc;
    std::string given;
    for (int i = 2; i < argc; ++i) given += std::string(" ") + argv[i];
    std::fprintf(stderr, "hpu-bench %s: bad or missing arguments:%s\n", c.name, given.empty() ? " (none)" : given.c_str());
    return usage(c, stderr);
  }
  // No command (the list, exit 0), -h/--help (the same), or an unknown one (exit 2).
  const bool bad = argc >= 2 && !is_help(argv[1]);
  FILE *to = bad ? stderr : stdout;
  if (bad) std::fprintf(stderr, "hpu-bench: unknown command \"%s\"\n", argv[1]);
  std::fprintf(to, "usage: hpu-bench COMMAND [options]   (hpu-bench COMMAND --help: its options)\n\ncommands:\n");
  for (const auto &c : bench::commands()) std::fprintf(to, "  %-14s %s\n", c.name, c.help);
  return bad ? 2 : 0;
}
