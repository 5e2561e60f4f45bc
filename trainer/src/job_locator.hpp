// Finds the line of every key and array element of a JSON text, by path
// ("trainer.devices", "model.layers[2].out_features"), for error messages:
// jansson reports lines for syntax errors only.
#pragma once

#include <map>
#include <string>

namespace hpu::detail {

// The text must be valid JSON (parse it with jansson first).
std::map<std::string, int> json_key_lines(const std::string &text);

// The first key that appears twice in one object, in document order: its path,
// the line of its second appearance and that of its first; path "" when no key
// repeats. (Keys are compared as written: escapes are not decoded.)
struct DuplicateKey {
  std::string path;
  int line = 0, first_line = 0;
};
DuplicateKey json_duplicate_key(const std::string &text);

}  // namespace hpu::detail
