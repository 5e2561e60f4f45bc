// hpu::Trainer's options, with Lightning's names, defaults and meanings, and
// their resolution (validation, "auto" choices).
#pragma once

#include <hpu/trainer/callback.hpp>
#include <hpu/trainer/logger.hpp>
#include <hpu/trainer/ref.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hpu {

// `devices`: a count (-1 = every visible device) or "auto" (every visible device).
struct Devices {
  Devices(int n) : count(n) {}
  Devices(const char *s) : text(s ? s : "") {}
  Devices(std::string s) : text(std::move(s)) {}
  int count = 0;       // when text is empty
  std::string text;    // "auto" or a number as text ("2"), as Lightning accepts
};

// limit_*_batches and val_check_interval: a fraction of the epoch (a double in
// [0, 1]) or a number of batches (an integer).
struct BatchCount {
  BatchCount(int n) : batches(n) {}
  BatchCount(int64_t n) : batches(n) {}
  BatchCount(double f) : fraction(f) {}
  std::optional<double> fraction;
  int64_t batches = 0;
};

// max_time: Lightning's "DD:HH:MM:SS" text (days, hours, minutes,
// seconds; each a whole number, the seconds may have a fraction) or a
// duration; neither: no limit.
struct MaxTime {
  MaxTime() = default;
  MaxTime(const char *s) : text(s ? s : "") {}
  MaxTime(std::string s) : text(std::move(s)) {}
  template <class Rep, class Period>
  MaxTime(std::chrono::duration<Rep, Period> d) : seconds(std::chrono::duration<double>(d).count()) {}
  std::string text;               // when not empty
  std::optional<double> seconds;  // when text is empty
};

// fast_dev_run: true runs 1 batch of training, validation and test (a
// number n: n batches), false none of this (Lightning's bool or int).
struct FastDevRun {
  FastDevRun(bool on) : batches(on ? 1 : 0), flag(true) {}
  FastDevRun(int n) : batches(n) {}
  FastDevRun(int64_t n) : batches(n) {}
  int64_t batches = 0;
  bool flag = false;  // given as true or false
};

struct TrainerOptions {
  std::string accelerator = "auto";      // "hpu" | "auto"
  Devices devices = "auto";              // per process (per node)
  std::string strategy = "auto";         // "auto" | "hpu_single" | "hpu_ddp"
  std::string precision = "32-true";     // "32-true" | "bf16-mixed"
  int num_nodes = 1;                     // processes a launcher starts, each of `devices`
  std::optional<int64_t> max_epochs;     // none and max_steps == -1: 1000; -1: no limit
  int64_t max_steps = -1;                // -1: no limit
  // Epochs to train even when asked to stop earlier (EarlyStopping,
  // max_time); the stop comes at the first chance after them. None: 0.
  std::optional<int64_t> min_epochs;
  // Stops fitting at the first batch boundary after this much time since
  // fit started (checkpoints and on_train_end as at any stop).
  MaxTime max_time;
  // A smoke test (Lightning's): fast_dev_run batches of training (one
  // epoch, as max_steps), validation and test, no sanity check; no loggers
  // (nothing is written), ModelCheckpoint saves nothing and EarlyStopping
  // does not check.
  FastDevRun fast_dev_run = false;
  // Validation batches fit runs before training, to catch a broken
  // validation early; their metrics are not logged. -1: every batch
  // limit_val_batches lets run; 0: none.
  int num_sanity_val_steps = 2;
  BatchCount limit_train_batches = 1.0;
  BatchCount limit_val_batches = 1.0;
  BatchCount limit_test_batches = 1.0;
  BatchCount limit_predict_batches = 1.0;
  BatchCount val_check_interval = 1.0;   // fraction of an epoch or every n batches
  int check_val_every_n_epoch = 1;
  int log_every_n_steps = 50;
  int accumulate_grad_batches = 1;
  double gradient_clip_val = 0.0;        // clip the global gradient norm; 0: off
  std::optional<uint64_t> seed;          // none: a random seed, logged
  std::string default_root_dir;          // "": the current folder
  std::vector<Ref<Callback>> callbacks;
  Loggers logger = true;
  bool enable_progress_bar = true;
  bool enable_checkpointing = true;
  bool enable_model_summary = true;      // print model_summary() at the start of fit (global rank 0)
  std::string profiler;                  // "" | "hpu": one libhpu trace per fit, and its summary
};

// The options after validation, with every "auto" decided.
struct TrainerConfig {
  std::string accelerator;    // "hpu"
  int devices = 1;            // devices of this process
  int num_nodes = 1;
  int node_rank = 0;          // this process among the num_nodes (the Trainer's, from the collectives)
  int world_size = 1;         // num_nodes x devices
  std::string strategy;       // "hpu_single" | "hpu_ddp"
  std::string precision;      // "32-true" | "bf16-mixed"
  int64_t max_epochs = 1000;  // -1: no limit
  int64_t max_steps = -1;
  std::optional<double> max_time;  // seconds
  uint64_t seed = 0;
  std::string default_root_dir;
  std::string profiler;       // "" | "hpu"
};

// Validates `o` against the `visible` devices and decides the "auto" choices as
// Lightning does: accelerator "auto" is "hpu"; devices "auto" (or -1) is every
// visible device; strategy "auto" is "hpu_ddp" when devices x num_nodes > 1,
// else "hpu_single". Throws hpu::Error (HPU_ERROR_INVALID_ARGUMENT) naming the
// option, its value and the accepted values.
//
// Under a launcher each process is one node of `devices` ranks, and the world
// size is num_nodes x devices. A launcher's count must agree, else the error
// names both: WORLD_SIZE counts ranks (Lightning's and torchrun's meaning, as
// hpuCommInitFromEnv(3) reads it), OMPI_COMM_WORLD_SIZE and SLURM_NTASKS count
// processes. The Trainer checks the group the collectives make too (this
// covers HPU_WORLD_SIZE, and num_nodes > 1 without any launcher).
TrainerConfig resolve_options(const TrainerOptions &o, int visible);

// The devices per process `d` asks for, of `visible` ones ("auto" and -1: all);
// throws as resolve_options does ("devices is 99, but only 8 HPUs are visible").
int resolve_devices(const Devices &d, int visible);

// max_time in seconds (none: no limit); hpu::Error
// (HPU_ERROR_INVALID_ARGUMENT) naming max_time and its value when the text is
// not "DD:HH:MM:SS" or the duration is negative or not finite.
std::optional<double> max_time_seconds(const MaxTime &t);

// How many of `total` batches a limit lets run (Lightning's rules: a fraction
// rounds down but keeps at least one batch when the fraction is > 0).
int64_t limit_batches(const BatchCount &limit, int64_t total);

}  // namespace hpu
