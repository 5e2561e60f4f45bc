// hpu-train on two "hosts" (network namespaces joined by a veth pair, made by
// tests/support/netns.hpp; needs root), one device each, hpu_ddp over tcp,
// launched with torchrun's variables: the same weights and test metrics, bit
// for bit, as devices=2 in one process; and a host cut off mid-training (its
// link set down): both ranks fail with HPU_ERROR_TIMEOUT and a message by
// their deadline, exit non-zero, and leave only checkpoints that load.
#include <hpu/trainer.hpp>

#include "launch_util.hpp"
#include "netns.hpp"
#include "test_util.hpp"


#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace trainer_test;
using hpu_test::Hosts;
using Clock = std::chrono::steady_clock;

namespace {

// hpu-train on `job` inside both hosts (rank = host), rank 0's output in
// dir/name.out, rank 1's in dir/name1.out.
std::vector<pid_t> launch_on_hosts(const Hosts &h, const TempDir &dir, const std::string &job, const std::string &name,
                                   const std::vector<std::string> &args = {},
                                   const std::map<std::string, std::string> &env = {}) {
  std::vector<pid_t> pids;
  std::vector<std::string> argv = {job, "--devices", "1", "--num-nodes", "2"};
  argv.insert(argv.end(), args.begin(), args.end());
  for (int host = 0; host < 2; ++host) {
    auto e = h.env(host, env);
    e["LOCAL_RANK"] = "0";
    pids.push_back(spawn(argv, e, dir / (name + (host ? "1.out" : ".out")), h.in(host, {})));
  }
  return pids;
}

}  // namespace

TEST(Hosts, TwoHostsReachTheWeightsOfTwoDevicesInOneProcess) {
  Hosts h;
  ASSERT_TRUE(h.ok) << h.why;
  TempDir dir;
  const std::string threads = job_in(dir, "threads"), hosts = job_in(dir, "hosts");
  ASSERT_EQ(wait_for(spawn({threads, "--devices", "2"}, {}, dir / "threads.out"), std::chrono::seconds(300)), 0)
      << slurp(dir / "threads.out");
  auto pids = launch_on_hosts(h, dir, hosts, "hosts");
  for (int host = 0; host < 2; ++host)
    EXPECT_EQ(wait_for(pids[size_t(host)], std::chrono::seconds(300)), 0)
        << slurp(dir / (host ? "hosts1.out" : "hosts.out"));
  expect_same_run(dir, "threads", "hosts");
}

// Host 1's link goes down while both train (rank 0 saving last.ckpt every
// step): no packet says so, and each rank's collective times out.
TEST(Hosts, ACutHostFailsBothRanksAndLeavesOnlyWholeCheckpoints) {
  Hosts h;
  ASSERT_TRUE(h.ok) << h.why;
  TempDir dir;
  const std::string job = job_in(dir, "cut", "\"every_n_train_steps\": 1");
  const double timeout = 5;
  auto pids = launch_on_hosts(h, dir, job, "cut",
                              {"--max-epochs", "-1", "--limit-train-batches", "1.0"},
                              {{"HPU_COMM_TIMEOUT", std::to_string(timeout)}});
  const std::string last = dir / "cut/last.ckpt";
  for (auto until = Clock::now() + std::chrono::seconds(120); !file_exists(last) && Clock::now() < until;)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(file_exists(last)) << slurp(dir / "cut.out");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto cut = Clock::now();
  ASSERT_TRUE(h.cut(1));
  for (int host = 0; host < 2; ++host) {
    const int st = wait_for(pids[size_t(host)], std::chrono::duration<double>(timeout + 60));
    const double took = std::chrono::duration<double>(Clock::now() - cut).count();
    const std::string out = slurp(dir / (host ? "cut1.out" : "cut.out"));
    EXPECT_NE(st, -1) << "host " << host << " hung:\n" << out;
    EXPECT_NE(st, 0) << out;
    EXPECT_LT(took, timeout + 10) << out;
    EXPECT_NE(out.find("HPU_ERROR_TIMEOUT"), std::string::npos) << out;
  }
  // Nothing half-written: no temporary left, and every checkpoint loads.
  for (const std::string &name : list_dir(dir / "cut")) {
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << name;
    try {
      hpu::load_checkpoint_file(dir / ("cut/" + name));
    } catch (const hpu::Error &e) {
      ADD_FAILURE() << name << ": " << e.what();
    }
  }
  EXPECT_EQ(state_dict(last).size(), 4u);
}
