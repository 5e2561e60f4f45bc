// Crash safety of checkpoints: a short write (HPU_FAULT_INJECT
// checkpoint_short_write=N) fails with HPU_ERROR_IO and leaves the previous file
// whole; hpu-train killed with SIGKILL at random moments while it writes a
// checkpoint every step always leaves checkpoints that load, and resuming from
// the newest reproduces the uninterrupted run bit for bit. A few kills in the
// default suite, 50 with HPU_TEST_FULL=1.
#include "fault_inject.hpp"
#include "fit_util.hpp"
#include "test_util.hpp"

#include <hpu/trainer.hpp>

#include <jansson.h>
#include <zlib.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <random>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace trainer_test;

namespace {

bool ends_with(const std::string &s, const std::string &tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

hpu::Checkpoint small_checkpoint(float fill) {
  hpu::Checkpoint c;
  c.meta = R"({"epoch":1})";
  hpu::CheckpointTensor t;
  t.shape = {64};
  std::vector<float> v(64, fill);
  t.bytes.assign(reinterpret_cast<const uint8_t *>(v.data()), reinterpret_cast<const uint8_t *>(v.data() + 64));
  c.tensors["w"] = t;
  return c;
}

// HPU_FAULT_INJECT's trainer faults for this test's scope (libhpu reads the
// variable once; the trainer's own share can change while the process runs).
class FaultEnv {
 public:
  explicit FaultEnv(const char *spec) { hpu::detail::override_injected_faults(spec); }
  ~FaultEnv() { hpu::detail::override_injected_faults(nullptr); }
};

}  // namespace

TEST(CheckpointFaults, AShortWriteFailsAndKeepsThePreviousFileWhole) {
  TempDir dir;
  hpu::save_checkpoint_file(dir / "a.ckpt", small_checkpoint(1.0f));
  for (const char *spec : {"checkpoint_short_write=0", "checkpoint_short_write=10", "checkpoint_short_write=200"}) {
    FaultEnv fault(spec);
    EXPECT_HPU_ERROR(hpu::save_checkpoint_file(dir / "a.ckpt", small_checkpoint(2.0f)), HPU_ERROR_IO,
                     std::string("injected: HPU_FAULT_INJECT ") + spec);
    EXPECT_HPU_ERROR(hpu::save_checkpoint_file(dir / "b.ckpt", small_checkpoint(2.0f)), HPU_ERROR_IO, "No space left");
  }
  // The old file is intact, no new one and no temporary file is left.
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"a.ckpt"});
  EXPECT_EQ(hpu::load_checkpoint_file(dir / "a.ckpt").tensors.at("w").bytes, small_checkpoint(1.0f).tensors["w"].bytes);
  // A limit beyond the file's size changes nothing; without the fault, saving works again.
  {
    FaultEnv fault("alloc_fail_after=1000000,checkpoint_short_write=100000");
    hpu::save_checkpoint_file(dir / "b.ckpt", small_checkpoint(3.0f));
  }
  hpu::save_checkpoint_file(dir / "a.ckpt", small_checkpoint(4.0f));
  EXPECT_EQ(hpu::load_checkpoint_file(dir / "a.ckpt").tensors.at("w").bytes, small_checkpoint(4.0f).tensors["w"].bytes);
  EXPECT_EQ(hpu::load_checkpoint_file(dir / "b.ckpt").tensors.at("w").bytes, small_checkpoint(3.0f).tensors["w"].bytes);
}

TEST(CheckpointFaults, TheTrainerSurvivesAShortWriteAndSavesAfterwards) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  hpu::TrainerOptions o;
  o.default_root_dir = dir.path();
  o.max_epochs = 1;
  o.limit_train_batches = 2;
  o.enable_progress_bar = false;
  o.logger = false;
  o.callbacks = {hpu::ModelCheckpoint({.save_top_k = 0, .save_last = true})};
  hpu::Trainer t(o);
  hpu::Classifier model(mlp(), adamw());
  {
    FaultEnv fault("checkpoint_short_write=1000");
    EXPECT_HPU_ERROR(t.fit(model, data), HPU_ERROR_IO, "checkpoint_short_write=1000");
    EXPECT_HPU_ERROR(t.save_checkpoint(dir / "x.ckpt"), HPU_ERROR_IO, "checkpoint_short_write=1000");
  }
  EXPECT_FALSE(file_exists(dir / "x.ckpt"));
  t.save_checkpoint(dir / "x.ckpt");
  EXPECT_FALSE(hpu::load_checkpoint_file(dir / "x.ckpt").tensors.empty());
}

// The trainer reads its fault as libhpu reads every setting, so the HPU_CONFIG
// file sets it as well as the environment does.
TEST(CheckpointFaults, TheConfigurationFileAndTheEnvironmentSetTheTrainersFault) {
  TempDir dir;
  spit(dir / "job.json", R"({
  "model": {"layers": [{"type": "flatten"}, {"type": "linear", "in_features": 784, "out_features": 10}]},
  "data": {"name": "fashion_mnist", "root": "/usr/share/datasets/fashion-mnist", "batch_size": 32, "val_size": 64},
  "trainer": {"devices": 1, "max_epochs": 1, "limit_train_batches": 1, "limit_val_batches": 1, "seed": 7,
              "logger": [], "enable_progress_bar": false,
              "callbacks": [{"type": "ModelCheckpoint", "save_last": true}]},
  "test": false
})");
  spit(dir / "config.json", R"({"fault_inject": "checkpoint_short_write=10"})");
  const std::string train = std::string(HPU_TRAIN_EXE) + " " + (dir / "job.json") + " --default-root-dir ";
  for (const std::string &how : {"HPU_CONFIG=" + (dir / "config.json"), std::string("HPU_FAULT_INJECT=checkpoint_short_write=10")}) {
    SCOPED_TRACE(how);
    const std::string log = dir / "out.log";
    const int st = std::system(("env " + how + " " + train + (dir / "root") + " >" + log + " 2>&1").c_str());
    EXPECT_NE(st, 0);
    EXPECT_NE(slurp(log).find("injected: HPU_FAULT_INJECT checkpoint_short_write=10"), std::string::npos) << slurp(log);
  }
  const std::string log = dir / "ok.log";
  EXPECT_EQ(std::system((train + (dir / "ok") + " >" + log + " 2>&1").c_str()), 0) << slurp(log);
}

// Inputs the fuzz targets found (tests/fuzz/corpus), replayed in the default build.
TEST(CheckpointFaults, FuzzFindingsStayFixed) {
  TempDir dir;
  // A tensor's dtype byte of 120: HPU_ERROR_IO naming it (it was loaded into
  // hpuDataType_t before its range check). The input's last 4 bytes become its CRC.
  std::string ck = slurp(HPU_SOURCE_DIR "/tests/fuzz/corpus/checkpoint/crash-dtype-out-of-enum-range");
  ASSERT_GT(ck.size(), 4u);
  uint32_t crc = uint32_t(crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef *>(ck.data()), uInt(ck.size() - 4)));
  for (int i = 0; i < 4; ++i) ck[ck.size() - 4 + size_t(i)] = char(crc >> (8 * i));
  spit(dir / "a.ckpt", ck);
  EXPECT_HPU_ERROR(hpu::load_checkpoint_file(dir / "a.ckpt"), HPU_ERROR_IO, "has dtype 120");
  // A callback with an unknown key: HPU_ERROR_CONFIG (and, under ASan, no leak).
  EXPECT_HPU_ERROR(hpu::parse_job(slurp(HPU_SOURCE_DIR "/tests/fuzz/corpus/train_job/leak-unknown-callback-key.json"),
                                  "job.json"),
                   HPU_ERROR_CONFIG, "*ave_last");
}

namespace {

const char *const kJob = R"({
  "model": {"layers": [{"type": "flatten"}, {"type": "linear", "in_features": 784, "out_features": 32},
                       {"type": "relu"}, {"type": "linear", "in_features": 32, "out_features": 10}]},
  "data": {"name": "fashion_mnist", "root": "/usr/share/datasets/fashion-mnist", "batch_size": 32, "val_size": 64},
  "optimizer": {"name": "adamw", "lr": 0.001},
  "trainer": {"devices": 1, "precision": "32-true", "max_epochs": 3, "limit_train_batches": 10,
              "limit_val_batches": 1, "seed": 7, "logger": [], "enable_progress_bar": false,
              "callbacks": [{"type": "ModelCheckpoint", "every_n_train_steps": 1, "save_top_k": -1,
                             "save_last": true}]},
  "test": false
})";

// Starts hpu-train on the job with `args`; its output goes to `log`.
pid_t start_train(const std::string &job, const std::string &root, const std::string &resume, const std::string &log) {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    if (resume.empty())
      execl(HPU_TRAIN_EXE, HPU_TRAIN_EXE, job.c_str(), "--default-root-dir", root.c_str(), (char *)nullptr);
    else
      execl(HPU_TRAIN_EXE, HPU_TRAIN_EXE, job.c_str(), "--default-root-dir", root.c_str(), "--ckpt-path",
            resume.c_str(), (char *)nullptr);
    _exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string ckpt_dir(const std::string &root) { return root + "/lightning_logs/version_0/checkpoints"; }

// Returns once `dir` holds a file or the process `pid` has exited.
void wait_first_checkpoint(pid_t pid, const std::string &dir) {
  for (;;) {
    siginfo_t info{};
    if (!list_dir(dir).empty() || waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

int64_t global_step(const hpu::Checkpoint &c) {
  json_t *j = json_loads(c.meta.c_str(), 0, nullptr);
  int64_t s = j ? json_integer_value(json_object_get(j, "global_step")) : -1;
  json_decref(j);
  return s;
}

void expect_same_tensors(const hpu::Checkpoint &a, const hpu::Checkpoint &b, const std::string &what) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size()) << what;
  for (const auto &[name, t] : a.tensors) {
    auto it = b.tensors.find(name);
    ASSERT_NE(it, b.tensors.end()) << what << ": " << name;
    EXPECT_EQ(t.shape, it->second.shape) << what << ": " << name;
    EXPECT_TRUE(t.bytes == it->second.bytes) << what << ": tensor " << name << " differs";
  }
}

}  // namespace

TEST(CheckpointKill, TheNewestCheckpointLoadsAndResumingReproducesTheRun) {
  TempDir dir;
  const std::string job = dir / "job.json";
  spit(job, kJob);
  pid_t ref_pid = start_train(job, dir / "ref", "", dir / "ref.log");
  wait_first_checkpoint(ref_pid, ckpt_dir(dir / "ref"));
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(wait_exit(ref_pid), 0) << slurp(dir / "ref.log");
  // How long the run writes checkpoints (one a step), from the first one on.
  const double span_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const hpu::Checkpoint ref = hpu::load_checkpoint_file(ckpt_dir(dir / "ref") + "/last.ckpt");
  ASSERT_EQ(global_step(ref), 30);

  const int trials = std::getenv("HPU_TEST_FULL") ? 50 : 3;
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  // Kill anywhere from the first checkpoint on (the data set loads before it).
  std::uniform_real_distribution<double> when(0.0, span_s);
  int loaded = 0, torn_temporaries = 0, resumed_from_checkpoint = 0;
  for (int i = 0; i < trials; ++i) {
    const std::string root = dir / ("kill" + std::to_string(i));
    const double delay = when(rng);
    SCOPED_TRACE("trial " + std::to_string(i) + " of seed " + std::to_string(seed) + ": SIGKILL after " +
                 std::to_string(delay) + " s");
    pid_t pid = start_train(job, root, "", root + ".log");
    wait_first_checkpoint(pid, ckpt_dir(root));
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    kill(pid, SIGKILL);
    wait_exit(pid);
    // Every file named .ckpt loads; a write cut short is only ever a temporary.
    std::string newest;
    int64_t newest_step = -1;
    for (const std::string &name : list_dir(ckpt_dir(root))) {
      if (!ends_with(name, ".ckpt")) {
        EXPECT_NE(name.find(".ckpt.tmp."), std::string::npos) << name;
        ++torn_temporaries;
        continue;
      }
      const std::string path = ckpt_dir(root) + "/" + name;
      try {
        int64_t step = global_step(hpu::load_checkpoint_file(path));
        ++loaded;
        if (step > newest_step) newest_step = step, newest = path;
      } catch (const hpu::Error &e) {
        ADD_FAILURE() << "corrupt checkpoint after SIGKILL: " << e.what();
      }
    }
    if (!newest.empty()) ++resumed_from_checkpoint;
    ASSERT_EQ(wait_exit(start_train(job, root + "/resume", newest, root + "-resume.log")), 0)
        << slurp(root + "-resume.log");
    // A run killed after its last step has nothing left to train: the resumed run
    // ends at once, with the weights it loaded.
    const std::string last = ckpt_dir(root + "/resume") + "/last.ckpt";
    if (!file_exists(last)) {
      EXPECT_EQ(newest_step, 30);
    }
    expect_same_tensors(ref, hpu::load_checkpoint_file(file_exists(last) ? last : newest),
                        "resumed from " + (newest.empty() ? std::string("nothing") : newest));
  }
  RecordProperty("checkpoints_loaded", loaded);
  RecordProperty("torn_temporaries", torn_temporaries);
  RecordProperty("resumed_from_checkpoint", resumed_from_checkpoint);
  std::printf("%d kills (seed %u): %d checkpoints loaded, 0 corrupt, %d torn temporaries, %d resumed from a "
              "checkpoint, all bit-identical to the uninterrupted run\n",
              trials, seed, loaded, torn_temporaries, resumed_from_checkpoint);
}
