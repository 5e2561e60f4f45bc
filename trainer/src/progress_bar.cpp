#include <hpu/trainer/callbacks.hpp>
#include <hpu/trainer/trainer.hpp>

#include "error.hpp"

#include <chrono>
#include <unistd.h>

namespace hpu {

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string show(const Metrics &m, const char *prefix) {
  std::string s;
  for (const auto &[k, v] : m)
    if (k.rfind(prefix, 0) == 0 && k.find('/') == std::string::npos) s += detail::format(" %s=%.4g", k.c_str(), v);
  return s;
}

}  // namespace

ProgressBar::ProgressBar(int refresh_rate, FILE *out, std::optional<bool> live)
    : refresh_(refresh_rate), out_(out ? out : stderr) {
  if (refresh_rate < 0) detail::fail(HPU_ERROR_INVALID_ARGUMENT, "refresh_rate is %d; expected >= 0", refresh_rate);
  live_ = live ? *live : ::isatty(::fileno(out_)) == 1;
}

void ProgressBar::on_train_epoch_start(Trainer &) {
  epoch_start_ = now();
  last_.clear();
  done_ = 0;
}

void ProgressBar::line(Trainer &t, int64_t done, int64_t total, bool final) {
  if (!t.is_global_zero()) return;
  const double secs = now() - epoch_start_;
  const double rate = secs > 0 ? double(done) / secs : 0.0;
  std::string text = detail::format("Epoch %lld: %lld/%lld", (long long)t.current_epoch(), (long long)done,
                                    (long long)total);
  if (live_) {
    const int width = 24;
    int filled = total > 0 ? int(double(width) * double(done) / double(total)) : 0;
    text += " [" + std::string(size_t(filled), '#') + std::string(size_t(width - filled), '.') + "]";
  }
  text += detail::format(" %.1f it/s", rate) + show(last_, "");
  if (final) text += show(t.state().callback_metrics, "val_");
  if (live_) {
    std::fprintf(out_, "\r%s\033[K%s", text.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
}

void ProgressBar::on_train_batch_end(Trainer &t, const Metrics &outputs, int64_t batch_idx) {
  last_ = outputs;
  done_ = batch_idx + 1;
  const int64_t total = t.state().num_training_batches, done = batch_idx + 1;
  const int64_t every = refresh_ > 0 ? refresh_ : (live_ ? 1 : std::max<int64_t>(1, total / 10));
  if (done % every == 0 && done < total) line(t, done, total, false);
}

void ProgressBar::on_train_epoch_end(Trainer &t) {
  line(t, done_, t.state().num_training_batches, true);
}

void ProgressBar::on_validation_end(Trainer &t) {
  if (t.state().stage != Stage::validate || !t.is_global_zero()) return;
  std::fprintf(out_, "Validation:%s\n", show(t.state().callback_metrics, "val_").c_str());
  std::fflush(out_);
}

void ProgressBar::on_test_end(Trainer &t) {
  if (!t.is_global_zero()) return;
  std::fprintf(out_, "Test:%s\n", show(t.state().callback_metrics, "test_").c_str());
  std::fflush(out_);
}

}  // namespace hpu
