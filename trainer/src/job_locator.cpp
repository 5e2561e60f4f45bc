#include "job_locator.hpp"

namespace hpu::detail {
namespace {

struct Scanner {
  const std::string &s;
  std::map<std::string, int> &out;
  DuplicateKey *dup = nullptr;  // the first key given twice in one object
  size_t i = 0;
  int line = 1;

  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) {
      if (s[i] == '\n') ++line;
      ++i;
    }
  }
  std::string string() {
    std::string v;
    ++i;  // opening quote
    while (i < s.size() && s[i] != '"') {
      if (s[i] == '\\' && i + 1 < s.size()) ++i;
      v += s[i++];
    }
    ++i;  // closing quote
    return v;
  }
  // Every call consumes a character unless it stands at the end or at a
  // closing bracket, which ends the container around it: so a malformed text
  // (the scanner also reads what jansson refused) cannot stall a loop.
  void value(const std::string &path, int depth) {
    ws();
    if (depth > 512) i = s.size();  // deeper than any job: stop scanning
    if (i >= s.size()) return;
    if (s[i] == '{') {
      ++i;
      std::map<std::string, int> seen;  // this object's keys and their lines
      for (;;) {
        ws();
        if (i >= s.size() || s[i] == '}' || s[i] == ']') break;
        if (s[i] == ',') {
          ++i;
          continue;
        }
        int at = line;
        std::string key = string();
        std::string child = path.empty() ? key : path + "." + key;
        out.emplace(child, at);
        auto first = seen.emplace(key, at);
        if (!first.second && dup && dup->path.empty()) *dup = {child, at, first.first->second};
        ws();
        if (i < s.size() && s[i] == ':') ++i;
        value(child, depth + 1);
      }
      ++i;
    } else if (s[i] == '[') {
      ++i;
      for (int n = 0;; ) {
        ws();
        if (i >= s.size() || s[i] == ']' || s[i] == '}') break;
        if (s[i] == ',') {
          ++i;
          continue;
        }
        std::string child = path + "[" + std::to_string(n++) + "]";
        out.emplace(child, line);
        value(child, depth + 1);
      }
      ++i;
    } else if (s[i] == '"') {
      string();
    } else {
      while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\n' &&
             s[i] != '\t' && s[i] != '\r')
        ++i;
    }
  }
};

}  // namespace

std::map<std::string, int> json_key_lines(const std::string &text) {
  std::map<std::string, int> out;
  Scanner sc{text, out};
  sc.value("", 0);
  return out;
}

DuplicateKey json_duplicate_key(const std::string &text) {
  std::map<std::string, int> lines;
  DuplicateKey d;
  Scanner sc{text, lines, &d};
  sc.value("", 0);
  return d;
}

}  // namespace hpu::detail
