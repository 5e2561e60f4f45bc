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
  throw hpu::Error(HPU_ERROR_UNSUPPORTED,
                   "this build cannot train yet: libhpu's tensor ops (hpu/tensor.h, hpu/ops.h) are not available; "
                   "use --check to validate the job");
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
