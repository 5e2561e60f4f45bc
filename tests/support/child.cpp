#include "child.hpp"

#include <dirent.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HPU_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HPU_TEST_ASAN 1
#endif
#endif

#ifdef HPU_TEST_ASAN
namespace {
bool g_skip_leak_check = false;
}
// LeakSanitizer's exit check locks the whole ASan allocator. GCC 12's runtime
// does not take those locks around fork(), so one held by another thread of
// the parent at the fork (a stream worker freeing a finished op) is never
// released in the child, and the check would wait forever. Such a child
// skips the check; the parent's own check still covers the library.
extern "C" int __lsan_is_turned_off() { return g_skip_leak_check; }
#endif

namespace hpu_test {

namespace {

int thread_count() {
  int n = 0;
  if (DIR *d = opendir("/proc/self/task")) {
    while (dirent *e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

}  // namespace

ChildResult run_child(const Env &env, const std::function<int()> &body) {
  int fds[2];
  ChildResult r;
  if (pipe(fds) != 0) return r;
  bool threaded = thread_count() > 1;
  pid_t pid = fork();
  if (pid == 0) {
#ifdef HPU_TEST_ASAN
    g_skip_leak_check = threaded;
#else
    (void)threaded;
#endif
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
