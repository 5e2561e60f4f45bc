// Shared ownership of polymorphic trainer parts (callbacks, loggers), built
// from a value (`hpu::DeviceStatsMonitor{}`, copied) or a shared_ptr (shared,
// so the caller can read the object afterwards, e.g. best_model_path).
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace hpu {

template <class Base>
class Ref {
 public:
  template <class T, class = std::enable_if_t<std::is_base_of_v<Base, std::decay_t<T>>>>
  Ref(T &&value) : p_(std::make_shared<std::decay_t<T>>(std::forward<T>(value))) {}
  template <class T, class = std::enable_if_t<std::is_base_of_v<Base, T>>>
  Ref(std::shared_ptr<T> p) : p_(std::move(p)) {}

  Base *operator->() const { return p_.get(); }
  Base &operator*() const { return *p_; }
  Base *get() const { return p_.get(); }
  const std::shared_ptr<Base> &shared() const { return p_; }

 private:
  std::shared_ptr<Base> p_;
};

}  // namespace hpu
