#include <hpu/trainer/logger.hpp>

#include "error.hpp"
#include "fs.hpp"
#include "json.hpp"

#include <jansson.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>

namespace hpu {

using detail::fail;

int next_version(const std::string &dir) {
  DIR *d = ::opendir(dir.c_str());
  if (!d) return 0;
  int next = 0;
  while (dirent *e = ::readdir(d)) {
    const char *name = e->d_name;
    if (std::strncmp(name, "version_", 8) != 0) continue;
    char *end = nullptr;
    long v = std::strtol(name + 8, &end, 10);
    if (end != name + 8 && *end == '\0' && v >= next) next = int(v) + 1;
  }
  ::closedir(d);
  return next;
}

FolderLogger::FolderLogger(std::string save_dir, std::string name, std::optional<int> version)
    : save_dir_(save_dir.empty() ? "." : std::move(save_dir)), name_(std::move(name)), version_(version) {
  if (version && *version < 0) fail(HPU_ERROR_INVALID_ARGUMENT, "version is %d; expected >= 0", *version);
}

std::string FolderLogger::log_dir() {
  if (dir_.empty()) {
    std::string base = name_.empty() ? save_dir_ : save_dir_ + "/" + name_;
    if (!version_) version_ = next_version(base);
    dir_ = base + "/version_" + std::to_string(*version_);
  }
  return dir_;
}

std::string FolderLogger::writable_dir() {
  detail::make_dirs(log_dir());
  return dir_;
}

// ---- CSV -------------------------------------------------------------------

CSVLogger::CSVLogger(std::string save_dir, std::string name, std::optional<int> version)
    : FolderLogger(std::move(save_dir), std::move(name), version) {}

void CSVLogger::log_metrics(const Metrics &metrics, int64_t step) {
  for (const auto &[k, v] : metrics) {
    (void)v;
    if (std::find(keys_.begin(), keys_.end(), k) == keys_.end()) {
      keys_.push_back(k);
      rewrite_ = true;
    }
  }
  // Metrics of one step share a row (as Lightning's CSV logger): a row is
  // written once a later step arrives, or at finalize.
  if (!rows_.empty() && rows_.back().first == step && written_ < rows_.size()) {
    for (const auto &[k, v] : metrics) rows_.back().second[k] = v;
  } else {
    rows_.emplace_back(step, metrics);
  }
  if (rows_.size() - written_ > 1 || rewrite_) flush(rows_.size() - 1);
}

void CSVLogger::flush(size_t upto) {
  const std::string path = writable_dir() + "/metrics.csv";
  auto row_text = [&](const std::pair<int64_t, Metrics> &row) {
    std::string line = std::to_string(row.first);
    for (const auto &k : keys_) {
      line += ',';
      auto it = row.second.find(k);
      if (it != row.second.end()) line += detail::number_text(it->second);
    }
    return line + "\n";
  };
  if (rewrite_) {
    std::string text = "step";
    for (const auto &k : keys_) text += "," + detail::csv_field(k);
    text += "\n";
    for (size_t i = 0; i < upto; ++i) text += row_text(rows_[i]);
    detail::write_file_atomic(path, text.data(), text.size());
    rewrite_ = false;
  } else {
    FILE *f = std::fopen(path.c_str(), "a");
    if (!f) fail(HPU_ERROR_IO, "cannot open %s: %s", path.c_str(), std::strerror(errno));
    for (size_t i = written_; i < upto; ++i) std::fputs(row_text(rows_[i]).c_str(), f);
    if (std::fclose(f) != 0) fail(HPU_ERROR_IO, "writing %s: %s", path.c_str(), std::strerror(errno));
  }
  written_ = upto;
}

void CSVLogger::log_hyperparams(const std::map<std::string, std::string> &params) {
  std::string text;
  for (const auto &[k, v] : params) {
    json_t *s = json_string(v.c_str());
    char *quoted = s ? json_dumps(s, JSON_ENCODE_ANY) : nullptr;
    text += k + ": " + (quoted ? quoted : "''") + "\n";
    std::free(quoted);
    json_decref(s);
  }
  const std::string path = writable_dir() + "/hparams.yaml";
  detail::write_file_atomic(path, text.data(), text.size());
}

void CSVLogger::finalize() {
  if (rewrite_ || written_ < rows_.size()) flush(rows_.size());
}

// ---- JSON lines -------------------------------------------------------------

JsonLinesLogger::JsonLinesLogger(std::string save_dir, std::string name, std::optional<int> version)
    : FolderLogger(std::move(save_dir), std::move(name), version) {}

// The values are written by detail::number_text() (jansson's reals have a fixed
// precision); a value that is not finite is null.
void JsonLinesLogger::log_metrics(const Metrics &metrics, int64_t step) {
  std::string line = "{\"step\":" + std::to_string(step);
  for (const auto &[k, v] : metrics) {
    detail::Json key(json_string(k.c_str()));
    if (!key) fail(HPU_ERROR_INVALID_ARGUMENT, "metric name \"%s\" is not UTF-8", k.c_str());
    line += "," + detail::dump(key.get(), JSON_ENCODE_ANY) + ":" + (std::isfinite(v) ? detail::number_text(v) : "null");
  }
  line += "}\n";
  const std::string path = writable_dir() + "/metrics.jsonl";
  FILE *f = std::fopen(path.c_str(), "a");
  if (!f) fail(HPU_ERROR_IO, "cannot open %s: %s", path.c_str(), std::strerror(errno));
  std::fputs(line.c_str(), f);
  if (std::fclose(f) != 0) fail(HPU_ERROR_IO, "writing %s: %s", path.c_str(), std::strerror(errno));
}

void JsonLinesLogger::log_hyperparams(const std::map<std::string, std::string> &params) {
  json_t *o = json_object();
  for (const auto &[k, v] : params) json_object_set_new(o, k.c_str(), json_string(v.c_str()));
  char *text = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
  json_decref(o);
  std::string s = text ? std::string(text) + "\n" : "{}\n";
  std::free(text);
  detail::write_file_atomic(writable_dir() + "/hparams.json", s.data(), s.size());
}

}  // namespace hpu
