// Module::parameters names what it returns after the prefix it is given; code
// that asks one layer for its parameters (model_summary, no_weight_decay's
// layer types) keeps the model's names with this.
#pragma once

#include <hpu/trainer/nn.hpp>

#include <string>
#include <utility>
#include <vector>

namespace hpu::detail {

// Restores the names `params` had when it was made, when it goes out of scope.
class KeepNames {
 public:
  explicit KeepNames(const std::vector<Parameter *> &params) {
    for (Parameter *p : params) names_.emplace_back(p, p->name);
  }
  ~KeepNames() {
    for (auto &[p, name] : names_) p->name = name;
  }
  KeepNames(const KeepNames &) = delete;
  KeepNames &operator=(const KeepNames &) = delete;

 private:
  std::vector<std::pair<Parameter *, std::string>> names_;
};

}  // namespace hpu::detail
