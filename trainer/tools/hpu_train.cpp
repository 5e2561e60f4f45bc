// hpu-train: runs a JSON-described training job on emulated HPUs.
#include <hpu/trainer.hpp>

#include "default_job.hpp"

#include <cstdio>

namespace {

int run(int argc, char **argv) {
  hpu::Cli cli = hpu::parse_cli(argc, argv);
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
  if (!r.best_model_path.empty()) std::fprintf(stderr, "hpu-train: best checkpoint %s\n", r.best_model_path.c_str());
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
  try {
    return run(argc, argv);
  } catch (const hpu::Error &e) {
    std::fprintf(stderr, "hpu-train: %s\n", e.what());
    return e.status() == HPU_ERROR_INVALID_ARGUMENT || e.status() == HPU_ERROR_CONFIG ? 2 : 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "hpu-train: %s\n", e.what());
    return 1;
  }
}
