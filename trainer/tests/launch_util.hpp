// Helpers of the trainer tests that launch hpu-train processes: a free port,
// hpu-train started with launcher variables (optionally inside another
// command, such as `ip netns exec HOST`), waiting with a limit, a small
// hpu_ddp job on Fashion-MNIST, and the weights its checkpoints hold.
#pragma once

#include <hpu/trainer.hpp>

#include "test_util.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace trainer_test {

inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0)
    std::abort();
  ::close(fd);
  return ntohs(a.sin_port);
}

// hpu-train with `args`, run by `prefix` (a command line ending where
// hpu-train's starts; empty: run directly), its output in `out`, with `env`
// added to the environment.
inline pid_t spawn(const std::vector<std::string> &args, const std::map<std::string, std::string> &env,
                   const std::string &out, const std::vector<std::string> &prefix = {}) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  for (const auto &[k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
  FILE *f = std::freopen(out.c_str(), "w", stdout);
  if (!f || ::dup2(::fileno(stdout), 2) < 0) ::_exit(126);
  std::vector<char *> argv;
  for (const auto &a : prefix) argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(const_cast<char *>(HPU_TRAIN_EXE));
  for (const auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  ::_exit(127);
}

// The exit status of `pid`, or -1 (after killing it) when it runs past `limit`.
inline int wait_for(pid_t pid, std::chrono::duration<double> limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (std::chrono::steady_clock::now() > end) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// 30 steps of a small MLP on Fashion-MNIST, bf16-mixed; rank 0 saves last.ckpt
// under the folder the job is named after.
inline const char *const kDdpJob = R"({
  "model": {"layers": [{"type": "flatten"}, {"type": "linear", "in_features": 784, "out_features": 64},
                       {"type": "relu"}, {"type": "linear", "in_features": 64, "out_features": 10}]},
  "data": {"name": "fashion_mnist", "batch_size": 32, "val_size": 1000},
  "optimizer": {"name": "adamw", "lr": 0.002},
  "trainer": {"precision": "bf16-mixed", "max_epochs": 1, "limit_train_batches": 30, "limit_val_batches": 4,
              "limit_test_batches": 4, "seed": 5, "enable_progress_bar": false, "logger": false,
              "callbacks": [{"type": "ModelCheckpoint", "save_last": true, "dirpath": "DIR"}]},
  "test": true
})";

// Writes kDdpJob as dir/name.json, saving into dir/name (with the further
// ModelCheckpoint keys `checkpoint`, such as "\"every_n_train_steps\": 1");
// returns its path.
inline std::string job_in(const TempDir &dir, const std::string &name, const std::string &checkpoint = "") {
  std::string j = kDdpJob;
  j.replace(j.find("\"DIR\""), 5, "\"" + dir / name + "\"" + (checkpoint.empty() ? "" : ", " + checkpoint));
  spit(dir / (name + ".json"), j);
  return dir / (name + ".json");
}

inline std::map<std::string, hpu::CheckpointTensor> state_dict(const std::string &path) {
  std::map<std::string, hpu::CheckpointTensor> out;
  for (auto &[k, v] : hpu::load_checkpoint_file(path).tensors)
    if (k.rfind("state_dict/", 0) == 0) out[k] = v;
  return out;
}

// The job of dir/a.json and that of dir/b.json (each run to its end, rank 0's
// output in dir/a.out and dir/b.out) saved the same weights bit for bit and
// printed the same test accuracy.
inline void expect_same_run(const TempDir &dir, const std::string &a, const std::string &b) {
  ASSERT_TRUE(file_exists(dir / (b + "/last.ckpt"))) << slurp(dir / (b + ".out"));
  const auto wa = state_dict(dir / (a + "/last.ckpt")), wb = state_dict(dir / (b + "/last.ckpt"));
  ASSERT_EQ(wa.size(), 4u);
  ASSERT_EQ(wa.size(), wb.size());
  for (const auto &[k, v] : wa) {
    ASSERT_TRUE(wb.count(k)) << k;
    EXPECT_TRUE(v.bytes == wb.at(k).bytes) << k << " differs";
  }
  const std::string ta = slurp(dir / (a + ".out")), tb = slurp(dir / (b + ".out"));
  const auto acc = [](const std::string &s) {
    const size_t i = s.find("test_acc");
    return i == std::string::npos ? std::string("missing") : s.substr(i, s.find('\n', i) - i);
  };
  EXPECT_NE(acc(tb), "missing") << tb;
  EXPECT_EQ(acc(ta), acc(tb)) << ta << "\n----\n" << tb;
}

}  // namespace trainer_test
