// JSON over jansson: RAII, and a reader of documents whose errors name the key
// and its line ("job.json:12: trainer.devices: <problem>").
#pragma once

#include <hpu/hpu.h>
#include <jansson.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include "error.hpp"

namespace hpu::detail {

struct JsonDeleter {
  void operator()(json_t *j) const { json_decref(j); }
};
using Json = std::unique_ptr<json_t, JsonDeleter>;

// Parses text that must be a JSON object; hpu::Error (`status`) naming `what`.
Json parse_object(const std::string &text, const char *what, hpuStatus_t status);
// Parses a document a user wrote (a job); hpu::Error (HPU_ERROR_CONFIG)
// "<source>:<line>: ..." for a syntax error or a key given twice in one object
// (which jansson would otherwise resolve silently to the last value).
Json parse_document(const std::string &text, const std::string &source);
// A value as JSON text, laid out as json_dumps() does with `flags`; reals are
// written by real_text(), so that they read back as the same double.
std::string dump(const json_t *j, size_t flags);
// A finite double as a real that JSON and YAML 1.1 read back as the same
// double: detail::number_text() with a '.' before any exponent ("1.0",
// "1.0e-05", "0.1").
std::string real_text(double v);

// "an object", "a string", ...: a value's type for messages.
const char *type_name(const json_t *v);

// Where values came from, for messages: "<source>:<line>: <key>: <problem>" or
// "command line <flag>: <key>: <problem>" for a command-line override.
struct JsonCtx {
  std::string source;
  std::map<std::string, int> lines;         // key path -> line (json_key_lines)
  std::map<std::string, std::string> flags;  // key path -> the flag that set it

  std::string where(const std::string &path) const;
  // Throws hpu::Error (HPU_ERROR_CONFIG) "<where>: <problem>".
  [[noreturn]] void error(const std::string &path, const std::string &problem) const;
};

// Reads the members of one object; finish() rejects the keys it did not read.
// (Not the destructor: an exception from a destructor that runs after a return
// value is built leaks that value with GCC < 13 and clang < 16, CWG 2176.)
class JsonObj {
 public:
  JsonObj(const JsonCtx &c, json_t *o, std::string path);
  void finish() const;
  // The path of a member: "trainer.devices".
  std::string key(const std::string &k) const { return path_.empty() ? k : path_ + "." + k; }
  // The member, or nullptr; marks it as read.
  json_t *get(const char *k);
  const JsonCtx &ctx() const { return c_; }

  // Each reads member k into out when present; a wrong type or a value out of
  // [lo, hi] (or not among `accepted`) is an error naming the key.
  template <class T>
  void integer(const char *k, T &out, long long lo, long long hi) {
    json_t *v = get(k);
    if (!v) return;
    if (!json_is_integer(v)) c_.error(key(k), std::string("expected an integer, found ") + type_name(v));
    long long x = json_integer_value(v);
    if (x < lo || x > hi) c_.error(key(k), format("%lld is out of range [%lld, %lld]", x, lo, hi));
    out = T(x);
  }
  void number(const char *k, double &out, double lo, double hi);
  void boolean(const char *k, bool &out);
  void string(const char *k, std::string &out, std::initializer_list<const char *> accepted = {});

 private:
  std::string known() const;
  const JsonCtx &c_;
  json_t *o_;
  std::string path_;
  std::set<std::string> used_;
};

}  // namespace hpu::detail
