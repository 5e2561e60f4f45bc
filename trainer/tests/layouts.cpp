// hpu-train(1)'s promise that the ranks' layout does not change the bits:
// the same job on 3 devices of one process and on 3 processes of one device
// each (bf16-mixed), and on 4 devices and 4 processes (32-true), saves the same
// weights bit for bit and prints the same test accuracy. The collectives
// combine the ranks' gradients in rank order whatever carries them
// (hpuAllreduce(3)); world size 2, where every order is the same, is
// ddp.cpp's.
#include <hpu/trainer.hpp>

#include "launch_util.hpp"
#include "test_util.hpp"

#include <chrono>
#include <string>
#include <vector>

using namespace trainer_test;

namespace {

// The job of `name` (kDdpJob in `precision`) on `ranks` devices of one
// process, and on `ranks` processes of one device each (torchrun's variables
// on loopback), as name_threads and name_procs.
void expect_same_weights_in_both_layouts(const TempDir &dir, const std::string &name, int ranks,
                                         const std::string &precision) {
  std::string threads = job_in(dir, name + "_threads"), procs = job_in(dir, name + "_procs");
  for (const std::string &path : {threads, procs}) {
    std::string j = slurp(path);
    j.replace(j.find("bf16-mixed"), 10, precision);
    spit(path, j);
  }
  const auto limit = std::chrono::seconds(300);
  ASSERT_EQ(wait_for(spawn({threads, "--devices", std::to_string(ranks)}, {},
                           dir / (name + "_threads.out")),
                     limit),
            0)
      << slurp(dir / (name + "_threads.out"));
  const std::string port = std::to_string(free_port());
  std::vector<pid_t> pids;
  auto out = [&](int r) { return dir / (name + "_procs" + (r ? std::to_string(r) : "") + ".out"); };
  for (int r = 0; r < ranks; ++r)
    pids.push_back(spawn({procs, "--devices", "1", "--num-nodes", std::to_string(ranks)},
                         {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}, {"WORLD_SIZE", std::to_string(ranks)},
                          {"RANK", std::to_string(r)}, {"LOCAL_RANK", std::to_string(r)}},
                         out(r)));
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(wait_for(pids[size_t(r)], limit), 0) << slurp(out(r));
  expect_same_run(dir, name + "_threads", name + "_procs");
}

}  // namespace

TEST(Layouts, ThreeDevicesAndThreeProcessesEndWithTheSameWeightsBf16Mixed) {
  TempDir dir;
  expect_same_weights_in_both_layouts(dir, "three", 3, "bf16-mixed");
}

TEST(Layouts, FourDevicesAndFourProcessesEndWithTheSameWeights32True) {
  TempDir dir;
  expect_same_weights_in_both_layouts(dir, "four", 4, "32-true");
}
