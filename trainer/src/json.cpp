#include "json.hpp"

#include "job_locator.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace hpu::detail {

Json parse_object(const std::string &text, const char *what, hpuStatus_t status) {
  json_error_t err;
  Json j(json_loadb(text.data(), text.size(), 0, &err));
  if (!j) fail(status, "%s: line %d: %s", what, err.line, err.text);
  if (!json_is_object(j.get())) fail(status, "%s: expected a JSON object", what);
  return j;
}

Json parse_document(const std::string &text, const std::string &source) {
  json_error_t err;
  Json j(json_loadb(text.data(), text.size(), JSON_REJECT_DUPLICATES, &err));
  if (j) return j;
  if (json_error_code(&err) == json_error_duplicate_key) {
    const DuplicateKey d = json_duplicate_key(text);
    if (!d.path.empty())
      fail(HPU_ERROR_CONFIG, "%s:%d: %s: duplicate key, first given at line %d; give each key once", source.c_str(),
           d.line, d.path.c_str(), d.first_line);
    fail(HPU_ERROR_CONFIG, "%s:%d: duplicate key: %s", source.c_str(), err.line, err.text);
  }
  fail(HPU_ERROR_CONFIG, "%s:%d: JSON syntax error: %s", source.c_str(), err.line, err.text);
}

namespace {

// jansson's text for a value that is not an object, an array or a real.
std::string scalar_text(const json_t *j, size_t flags) {
  char *s = json_dumps(j, (flags & ~size_t(JSON_MAX_INDENT)) | JSON_ENCODE_ANY);
  if (!s) fail(HPU_ERROR_OUT_OF_MEMORY, "cannot encode JSON");
  std::string out(s);
  std::free(s);
  return out;
}

// jansson's layout (JSON_INDENT, JSON_COMPACT, JSON_SORT_KEYS), with reals as
// real_text() writes them.
void write(const json_t *j, size_t flags, int depth, std::string &out) {
  const int indent = int(flags & JSON_MAX_INDENT);
  const bool compact = flags & JSON_COMPACT;
  auto newline = [&](int d) {
    if (indent) out += '\n' + std::string(size_t(indent * d), ' ');
  };
  auto separator = [&] {
    out += ',';
    if (indent) newline(depth + 1);
    else if (!compact) out += ' ';
  };
  if (json_is_array(j)) {
    if (json_array_size(j) == 0) return void(out += "[]");
    out += '[';
    newline(depth + 1);
    for (size_t i = 0; i < json_array_size(j); ++i) {
      if (i) separator();
      write(json_array_get(j, i), flags, depth + 1, out);
    }
    newline(depth);
    out += ']';
  } else if (json_is_object(j)) {
    if (json_object_size(j) == 0) return void(out += "{}");
    std::vector<const char *> keys;
    const char *k;
    json_t *v;
    json_object_foreach(const_cast<json_t *>(j), k, v) keys.push_back(k);
    if (flags & JSON_SORT_KEYS)
      std::sort(keys.begin(), keys.end(), [](const char *a, const char *b) { return std::strcmp(a, b) < 0; });
    out += '{';
    newline(depth + 1);
    for (size_t i = 0; i < keys.size(); ++i) {
      if (i) separator();
      Json key(json_string(keys[i]));
      out += scalar_text(key.get(), flags) + (compact ? ":" : ": ");
      write(json_object_get(j, keys[i]), flags, depth + 1, out);
    }
    newline(depth);
    out += '}';
  } else if (json_is_real(j)) {
    out += real_text(json_real_value(j));
  } else {
    out += scalar_text(j, flags);
  }
}

}  // namespace

std::string real_text(double v) {
  std::string s = number_text(v);
  if (s.find('.') == std::string::npos) {
    const size_t e = s.find('e');
    s.insert(e == std::string::npos ? s.size() : e, ".0");
  }
  return s;
}

std::string dump(const json_t *j, size_t flags) {
  if (!j || (!(flags & JSON_ENCODE_ANY) && !json_is_object(j) && !json_is_array(j)))
    fail(HPU_ERROR_INTERNAL, "cannot encode JSON: not an object or an array");
  std::string out;
  write(j, flags, 0, out);
  return out;
}

const char *type_name(const json_t *v) {
  switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
  }
  return "?";
}

std::string JsonCtx::where(const std::string &path) const {
  auto f = flags.find(path);
  if (f != flags.end()) return "command line " + f->second + ": " + path;
  // The nearest enclosing key with a line.
  for (std::string p = path;;) {
    auto it = lines.find(p);
    if (it != lines.end()) return format("%s:%d: %s", source.c_str(), it->second, path.c_str());
    size_t cut = p.find_last_of(".[");
    if (cut == std::string::npos) return source + ": " + path;
    p = p.substr(0, cut);
  }
}

void JsonCtx::error(const std::string &path, const std::string &problem) const {
  fail(HPU_ERROR_CONFIG, "%s: %s", where(path).c_str(), problem.c_str());
}

JsonObj::JsonObj(const JsonCtx &c, json_t *o, std::string path) : c_(c), o_(o), path_(std::move(path)) {
  if (!json_is_object(o)) c.error(path_, std::string("expected an object, found ") + type_name(o));
}

void JsonObj::finish() const {
  const char *k;
  json_t *v;
  json_object_foreach(o_, k, v) {
    (void)v;
    if (!used_.count(k)) c_.error(key(k), "unknown key" + known());
  }
}

json_t *JsonObj::get(const char *k) {
  used_.insert(k);
  return json_object_get(o_, k);
}

void JsonObj::number(const char *k, double &out, double lo, double hi) {
  json_t *v = get(k);
  if (!v) return;
  if (!json_is_number(v)) c_.error(key(k), std::string("expected a number, found ") + type_name(v));
  double x = json_number_value(v);
  if (!(x >= lo && x <= hi)) c_.error(key(k), format("%g is out of range [%g, %g]", x, lo, hi));
  out = x;
}

void JsonObj::boolean(const char *k, bool &out) {
  json_t *v = get(k);
  if (!v) return;
  if (!json_is_boolean(v)) c_.error(key(k), std::string("expected true or false, found ") + type_name(v));
  out = json_is_true(v);
}

void JsonObj::string(const char *k, std::string &out, std::initializer_list<const char *> accepted) {
  json_t *v = get(k);
  if (!v) return;
  if (!json_is_string(v)) c_.error(key(k), std::string("expected a string, found ") + type_name(v));
  std::string s = json_string_value(v);
  if (accepted.size()) {
    std::string list;
    bool ok = false;
    for (const char *a : accepted) {
      ok |= s == a;
      list += std::string(list.empty() ? "" : ", ") + "\"" + a + "\"";
    }
    if (!ok) c_.error(key(k), "\"" + s + "\" is not one of " + list);
  }
  out = s;
}

std::string JsonObj::known() const {
  std::string s;
  for (const auto &a : used_) s += (s.empty() ? "; known keys: " : ", ") + a;
  return s;
}

}  // namespace hpu::detail
