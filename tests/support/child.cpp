#include "child.hpp"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

namespace hpu_test {

ChildResult run_child(const Env &env, const std::function<int()> &body) {
  int fds[2];
  ChildResult r;
  if (pipe(fds) != 0) return r;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    for (const auto &kv : env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
    _exit(body());
  }
  close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.output.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace hpu_test
