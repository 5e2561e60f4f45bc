// Experiment loggers: CSV (Lightning's CSVLogger layout) and JSON lines, each
// under <save_dir>/<name>/version_<n>/.
#pragma once

#include <hpu/trainer/ref.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hpu {

using Metrics = std::map<std::string, double>;

class Logger {
 public:
  virtual ~Logger() = default;
  virtual std::string name() const = 0;
  virtual void log_metrics(const Metrics &metrics, int64_t step) = 0;
  // The hyperparameters as the text of a JSON object, nested as the model
  // gave them (LightningModule::hyperparameters).
  virtual void log_hyperparams(const std::string &params) { (void)params; }
  virtual void finalize() {}
  // The run's folder; resolving it picks the version (the first free
  // version_<n> unless one was given). The folder is created when the logger
  // first writes there, so a run that fails before logging leaves none.
  virtual std::string log_dir() = 0;
};

// Base for loggers that write under <save_dir>/<name>/version_<n>.
class FolderLogger : public Logger {
 public:
  FolderLogger(std::string save_dir, std::string name, std::optional<int> version);
  std::string name() const override { return name_; }
  std::string log_dir() override;
  const std::string &save_dir() const { return save_dir_; }
  // Sets the version when none was given (the trainer gives all its loggers
  // one, picked by global rank 0).
  void default_version(int v) {
    if (!version_) version_ = v;
  }

 protected:
  std::string save_dir_, name_;
  std::optional<int> version_;
  std::string dir_;  // resolved
  // log_dir(), created (with its parents) if need be: for writing.
  std::string writable_dir();
};

// metrics.csv: one row per step, a "step" column then one column per metric in
// order of first appearance (the file is rewritten when a new key appears); a
// step's row is written when a later step is logged, and at finalize;
// hparams.yaml with the hyperparameters (the trainer gives it the model's when
// a fit starts) as Lightning's CSVLogger writes them with PyYAML: nested
// mappings, keys sorted, lists as "- " items, numbers as numbers, strings
// quoted only when YAML would read them as something else. Both file loggers
// write integers in full and other numbers in the shortest form that reads
// back as the same double.
class CSVLogger : public FolderLogger {
 public:
  explicit CSVLogger(std::string save_dir = ".", std::string name = "lightning_logs",
                     std::optional<int> version = std::nullopt);
  void log_metrics(const Metrics &metrics, int64_t step) override;
  void log_hyperparams(const std::string &params) override;
  void finalize() override;
  std::string metrics_path() { return log_dir() + "/metrics.csv"; }

 private:
  void flush(size_t upto);  // writes rows [written_, upto)
  std::vector<std::string> keys_;
  std::vector<std::pair<int64_t, Metrics>> rows_;
  size_t written_ = 0;      // rows already in the file
  bool rewrite_ = false;    // header changed
};

// metrics.jsonl: one JSON object per log call: {"step": n, "<key>": value, ...};
// hparams.json with the hyperparameters (nested, keys sorted). Non-finite
// values are written as null.
class JsonLinesLogger : public FolderLogger {
 public:
  explicit JsonLinesLogger(std::string save_dir = ".", std::string name = "lightning_logs",
                           std::optional<int> version = std::nullopt);
  void log_metrics(const Metrics &metrics, int64_t step) override;
  void log_hyperparams(const std::string &params) override;
  std::string metrics_path() { return log_dir() + "/metrics.jsonl"; }
};

// The first free n for <dir>/version_<n> (0 when the folder does not exist).
int next_version(const std::string &dir);

// Lightning's `logger` argument: true (a CSVLogger under default_root_dir),
// false (none), one logger or several.
struct Loggers {
  Loggers(bool enabled = true) : enabled(enabled) {}
  template <class T, class = std::enable_if_t<std::is_base_of_v<Logger, std::decay_t<T>>>>
  Loggers(T &&logger) : enabled(true), list{Ref<Logger>(std::forward<T>(logger))} {}
  template <class T, class = std::enable_if_t<std::is_base_of_v<Logger, T>>>
  Loggers(std::shared_ptr<T> logger) : enabled(true), list{Ref<Logger>(std::move(logger))} {}
  Loggers(std::initializer_list<Ref<Logger>> loggers) : enabled(true), list(loggers) {}
  bool enabled;
  std::vector<Ref<Logger>> list;
};

}  // namespace hpu
