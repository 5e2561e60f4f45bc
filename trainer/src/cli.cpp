// hpu-train's command line.
#include <hpu/trainer/job.hpp>

#include "error.hpp"
#include "option_fields.hpp"

#include <cstring>
#include <vector>

namespace hpu {

namespace {

struct Flag {
  std::string name;
  std::string key;  // the job key it overrides
  std::string help;
};

// The flags of the Trainer's options (option_fields.cpp), then those of the
// other parts of a job.
const std::vector<Flag> &flags() {
  static const std::vector<Flag> all = [] {
    std::vector<Flag> v;
    for (const detail::OptionField &f : detail::trainer_option_fields())
      if (f.flag) v.push_back({f.flag, std::string("trainer.") + f.key, f.help});
    v.insert(v.end(), {{"--batch-size", "data.batch_size", "B per device"},
                       {"--data-root", "data.root", "DIR holding the IDX files"},
                       {"--optimizer", "optimizer.name", "sgd | adamw"},
                       {"--lr", "optimizer.lr", "learning rate"},
                       {"--ckpt-path", "ckpt_path", "fit: resume from it; validate, test, predict: its weights"},
                       {"--test-ckpt-path", "test_ckpt_path", "weights of the test after fit: best | last | PATH"},
                       {"--output", "predict.output", "FILE the predictions go to (.csv)"}});
    return v;
  }();
  return all;
}

}  // namespace

std::string cli_usage() {
  std::string s =
      "usage: hpu-train [fit | validate | test | predict] [JOB.json] [options]\n"
      "Trains the model a JSON job describes (default: the built-in Fashion-MNIST job) and tests it;\n"
      "validate, test and predict use the weights of --ckpt-path instead of training.\n\n";
  for (const Flag &f : flags())
    s += detail::format("  %-26s %s (%s)\n", f.name.c_str(), f.help.c_str(), f.key.c_str());
  s += detail::format("  %-26s %s\n", "--no-progress-bar", "plain output, no progress bar");
  s += detail::format("  %-26s %s\n", "--no-test", "skip the test set after fitting");
  s += detail::format("  %-26s %s\n", "--check", "validate the job, print it with defaults, do not train");
  s += detail::format("  %-26s %s\n", "--version", "print the version");
  s += detail::format("  %-26s %s\n", "-h, --help", "this help");
  return s;
}

Cli parse_cli(int argc, const char *const *argv) {
  Cli cli;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i] ? argv[i] : "";
    // LightningCLI's subcommands, first on the line: the job's "command".
    if (i == 1 && (arg == "fit" || arg == "validate" || arg == "test" || arg == "predict")) {
      cli.overrides.push_back({"command", arg, arg});
    } else if (arg == "-h" || arg == "--help") {
      cli.help = true;
    } else if (arg == "--version") {
      cli.version = true;
    } else if (arg == "--check") {
      cli.check = true;
    } else if (arg == "--no-progress-bar") {
      cli.overrides.push_back({"trainer.enable_progress_bar", "false", arg});
    } else if (arg == "--no-test") {
      cli.overrides.push_back({"test", "false", arg});
    } else if (arg.rfind("--", 0) == 0) {
      std::string name = arg, value;
      size_t eq = arg.find('=');
      bool inline_value = eq != std::string::npos;
      if (inline_value) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
      }
      const Flag *flag = nullptr;
      for (const Flag &f : flags())
        if (name == f.name) flag = &f;
      if (!flag) detail::fail(HPU_ERROR_INVALID_ARGUMENT, "unknown option %s", name.c_str());
      if (!inline_value) {
        if (i + 1 >= argc) detail::fail(HPU_ERROR_INVALID_ARGUMENT, "option %s needs a value (%s)", name.c_str(),
                                 flag->help.c_str());
        value = argv[++i];
      }
      cli.overrides.push_back({flag->key, value, name});
    } else if (arg.size() > 1 && arg[0] == '-') {
      detail::fail(HPU_ERROR_INVALID_ARGUMENT, "unknown option %s", arg.c_str());
    } else if (cli.config.empty()) {
      cli.config = arg;
    } else {
      detail::fail(HPU_ERROR_INVALID_ARGUMENT, "more than one job file: %s and %s", cli.config.c_str(), arg.c_str());
    }
  }
  return cli;
}

}  // namespace hpu
