// Finds the line of every key and array element of a JSON text, by path
// ("trainer.devices", "model.layers[2].out_features"), for error messages:
// jansson reports lines for syntax errors only.
#pragma once

#include <map>
#include <string>

namespace hpu::detail {

// The text must be valid JSON (parse it with jansson first).
std::map<std::string, int> json_key_lines(const std::string &text);

}  // namespace hpu::detail
