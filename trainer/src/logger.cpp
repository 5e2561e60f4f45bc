#include <hpu/trainer/logger.hpp>

#include "error.hpp"
#include "fs.hpp"
#include "json.hpp"

#include <jansson.h>

#include <algorithm>
#include <cctype>
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

namespace {

// A string as YAML: plain when every YAML reader (1.1 and 1.2) reads it back
// as this string, otherwise single-quoted, or double-quoted with escapes when
// it holds control characters.
std::string yaml_string(const std::string &s) {
  bool plain = !s.empty() && (std::isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == '/') && s.back() != ' ';
  for (char c : s) plain = plain && (std::isalnum((unsigned char)c) || (c && std::strchr("_./- ", c)));
  std::string lower;
  for (char c : s) lower += char(std::tolower((unsigned char)c));
  for (const char *word : {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}) plain = plain && lower != word;
  if (plain) return s;
  if (std::any_of(s.begin(), s.end(), [](char c) { return (unsigned char)c < 0x20 || c == 0x7f; })) {
    detail::Json j(json_string(s.c_str()));
    if (!j) fail(HPU_ERROR_INVALID_ARGUMENT, "hyperparameter text \"%s\" is not UTF-8", s.c_str());
    return detail::dump(j.get(), JSON_ENCODE_ANY);  // a JSON string is a YAML double-quoted one
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

bool is_block(const json_t *v) {
  return (json_is_object(v) && json_object_size(v)) || (json_is_array(v) && json_array_size(v));
}

std::string yaml_scalar(const json_t *v) {
  switch (json_typeof(v)) {
    case JSON_OBJECT: return "{}";
    case JSON_ARRAY: return "[]";
    case JSON_STRING: return yaml_string(json_string_value(v));
    case JSON_INTEGER: return std::to_string(json_integer_value(v));
    case JSON_REAL: return detail::real_text(json_real_value(v));  // YAML 1.1 needs its '.'
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
  }
  return "null";
}

// A mapping's or a list's lines at `indent` spaces; with inline_first, the
// first line continues the caller's ("- key: value").
void yaml_node(const json_t *v, int indent, bool inline_first, std::string &out) {
  const std::string pad(size_t(indent), ' ');
  if (json_is_object(v)) {
    std::vector<std::string> keys;
    const char *k;
    json_t *item;
    json_object_foreach(const_cast<json_t *>(v), k, item) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    for (size_t i = 0; i < keys.size(); ++i) {
      const json_t *x = json_object_get(v, keys[i].c_str());
      out += (i || !inline_first ? pad : "") + yaml_string(keys[i]) + ":";
      if (json_is_object(x) && is_block(x)) {
        out += "\n";
        yaml_node(x, indent + 2, false, out);
      } else if (is_block(x)) {
        out += "\n";
        yaml_node(x, indent, false, out);  // a mapping's list is not indented
      } else {
        out += " " + yaml_scalar(x) + "\n";
      }
    }
  } else {
    for (size_t i = 0; i < json_array_size(v); ++i) {
      const json_t *x = json_array_get(v, i);
      out += (i || !inline_first ? pad : "") + "- ";
      if (is_block(x)) yaml_node(x, indent + 2, true, out);
      else out += yaml_scalar(x) + "\n";
    }
  }
}

// The hyperparameters (a JSON object's text) as PyYAML's yaml.dump writes
// them for Lightning's CSVLogger: keys sorted, a nested mapping indented by
// two spaces, a list's items ("- ") at its key's indentation.
std::string hparams_yaml(const std::string &params) {
  detail::Json o = detail::parse_object(params, "the hyperparameters", HPU_ERROR_INVALID_ARGUMENT);
  if (!is_block(o.get())) return "{}\n";
  std::string text;
  yaml_node(o.get(), 0, false, text);
  return text;
}

}  // namespace

void CSVLogger::log_hyperparams(const std::string &params) {
  const std::string text = hparams_yaml(params);
  detail::write_file_atomic(writable_dir() + "/hparams.yaml", text.data(), text.size());
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

void JsonLinesLogger::log_hyperparams(const std::string &params) {
  detail::Json o = detail::parse_object(params, "the hyperparameters", HPU_ERROR_INVALID_ARGUMENT);
  const std::string text = detail::dump(o.get(), JSON_INDENT(2) | JSON_SORT_KEYS) + "\n";
  detail::write_file_atomic(writable_dir() + "/hparams.json", text.data(), text.size());
}

}  // namespace hpu
