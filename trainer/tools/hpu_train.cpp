// hpu-train: runs a JSON-described training job on emulated HPUs.
#include <hpu/trainer.h>
#include <hpu/trainer.hpp>

#include "default_job.hpp"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <pthread.h>
#include <semaphore.h>
#include <thread>
#include <unistd.h>

namespace {

std::atomic<bool> g_interrupted{false};

void say(const char *text) {
  for (size_t n = std::strlen(text); n > 0;) {
    const ssize_t w = ::write(2, text, n);
    if (w <= 0) return;
    text += w, n -= size_t(w);
  }
}

sem_t g_sigint;  // posted by the signal handler, waited for by watch_sigint

void on_sigint(int) { sem_post(&g_sigint); }

// Ctrl-C. The first asks the job to stop before its next batch
// (hpuTrainerCancelJob, which is not for a signal handler: the handler only
// wakes this thread): the step in progress and a checkpoint being written end
// whole, the loggers write their last rows, and main() exits 130. A second
// one, or one while no job runs, exits at once.
void watch_sigint() {
  for (;;) {
    while (sem_wait(&g_sigint) != 0) {
    }
    if (g_interrupted.exchange(true) || hpuTrainerCancelJob() != HPU_SUCCESS) {
      say("\nhpu-train: interrupted\n");
      ::_exit(130);
    }
    say("\nhpu-train: interrupted; stopping before the next batch (Ctrl-C again to exit at once)\n");
  }
}

// Installs the handler unless SIGINT is ignored (a background job of a shell
// without job control). The threads this process starts from here on block
// SIGINT, so that the handler interrupts none of the run's system calls; it
// runs on the watching thread, or on a thread a library started before main
// (OpenBLAS's).
void handle_sigint() {
  struct sigaction sa {};
  if (sigaction(SIGINT, nullptr, &sa) != 0 || sa.sa_handler == SIG_IGN) return;
  if (sem_init(&g_sigint, 0, 0) != 0) return;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  std::thread([set] {
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    watch_sigint();
  }).detach();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  sa = {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
}

int run(int argc, char **argv) {
  hpu::Cli cli;
  try {
    cli = hpu::parse_cli(argc, argv);
  } catch (const hpu::Error &e) {
    // A bad command line: the problem, then the usage.
    std::fprintf(stderr, "hpu-train: %s\n\n%s", e.what(), hpu::cli_usage().c_str());
    return 2;
  }
  if (cli.help) {
    std::fputs(hpu::cli_usage().c_str(), stdout);
    return 0;
  }
  if (cli.version) {
    std::printf("hpu-train (libhpu) %s\n", HPU_VERSION_STRING);
    return 0;
  }
  hpu::Job job = cli.config.empty() ? hpu::parse_job(kDefaultJob, "<built-in fashion_mnist.json>", cli.overrides)
                                    : hpu::load_job(cli.config, cli.overrides);
  const hpu::TrainerConfig cfg = hpu::resolve_options(job.trainer, hpu::device_count());
  if (cli.check) {
    std::fputs(hpu::job_to_json(job).c_str(), stdout);
    std::printf("# resolved: accelerator=%s devices=%d num_nodes=%d world_size=%d strategy=%s precision=%s\n",
                cfg.accelerator.c_str(), cfg.devices, cfg.num_nodes, cfg.world_size, cfg.strategy.c_str(),
                cfg.precision.c_str());
    return 0;
  }
  const hpu::JobResult r = hpu::run_job(job, [](hpu::Trainer &trainer) {
    const hpu::TrainerConfig &c = trainer.config();
    std::fprintf(stderr, "hpu-train: %d device(s), strategy %s, precision %s, seed %llu, logs in %s\n", c.devices,
                 c.strategy.c_str(), c.precision.c_str(), (unsigned long long)c.seed, trainer.log_dir().c_str());
  });
  // Global rank 0 writes the checkpoints and says so.
  if (r.global_rank == 0 && !r.best_model_path.empty())
    std::fprintf(stderr, "hpu-train: best checkpoint %s\n", r.best_model_path.c_str());
  if (r.global_rank == 0) {
    for (const auto &[k, v] : r.validate) std::printf("%s %.4f\n", k.c_str(), v);
    for (const auto &[k, v] : r.test) std::printf("%s %.4f\n", k.c_str(), v);
    if (r.command == "predict")
      std::printf("predictions %zu rows to %s\n", r.predictions.rows(), r.predictions_path.c_str());
  }
  for (size_t i = 0; i < r.memory.size(); ++i) {
    const hpuMemStats_t &s = r.memory[i];
    std::printf("hpu%zu memory: InUse %.1f MiB, MaxInUse %.1f MiB, NumAllocs %llu, Limit %.1f GiB\n", i,
                double(s.in_use) / 1048576.0, double(s.max_in_use) / 1048576.0, (unsigned long long)s.num_allocs,
                double(s.limit) / 1073741824.0);
  }
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  handle_sigint();
  try {
    const int status = run(argc, argv);
    return g_interrupted ? 130 : status;
  } catch (const hpu::Error &e) {
    if (g_interrupted) {
      // As Lightning on KeyboardInterrupt: the run ended early, its logs
      // finalized (the Trainer's loggers, as it unwound); 128 + SIGINT.
      std::fprintf(stderr, "hpu-train: interrupted: %s\n", e.what());
      return 130;
    }
    std::fprintf(stderr, "hpu-train: %s\n", e.what());
    return e.status() == HPU_ERROR_INVALID_ARGUMENT || e.status() == HPU_ERROR_CONFIG ? 2 : 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "hpu-train: %s\n", e.what());
    return 1;
  }
}
