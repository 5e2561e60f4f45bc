// hpuTrainerRunJob: hpu-train's job run in-process, for C programs and the
// bindings; hpuTrainerCancelJob stops it from another thread. Failures become
// a status and libhpu's last error message.
#include <hpu/hpu.hpp>
#include <hpu/trainer.h>
#include <hpu/trainer/job.hpp>
#include <hpu/trainer/trainer.hpp>

#include "error.hpp"
#include "json.hpp"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

namespace {

json_t *number(double v) { return std::isfinite(v) ? json_real(v) : json_null(); }

json_t *metrics_object(const hpu::Metrics &m) {
  json_t *o = json_object();
  for (const auto &[k, v] : m) json_object_set_new(o, k.c_str(), number(v));
  return o;
}

std::string result_text(const hpu::JobResult &r) {
  hpu::detail::Json o(json_object());
  json_object_set_new(o.get(), "metrics", metrics_object(r.metrics));
  json_object_set_new(o.get(), "test", metrics_object(r.test));
  json_object_set_new(o.get(), "epoch", json_integer(json_int_t(r.epoch)));
  json_object_set_new(o.get(), "global_step", json_integer(json_int_t(r.global_step)));
  json_object_set_new(o.get(), "global_rank", json_integer(r.global_rank));
  json_object_set_new(o.get(), "world_size", json_integer(r.world_size));
  json_object_set_new(o.get(), "log_dir", json_string(r.log_dir.c_str()));
  json_object_set_new(o.get(), "best_model_path",
                      r.best_model_path.empty() ? json_null() : json_string(r.best_model_path.c_str()));
  return hpu::detail::dump(o.get(), JSON_COMPACT | JSON_PRESERVE_ORDER);
}

hpuStatus_t failed(hpuStatus_t status, const std::string &why, const char *fn = "hpuTrainerRunJob") noexcept {
  try {
    hpuSetLastErrorMessage((fn + (": " + why)).c_str());
  } catch (...) {
    hpuSetLastErrorMessage("hpuTrainerRunJob: host memory exhausted");
  }
  return status;
}

// The process's job: none, running, or running with a cancel asked for.
enum JobState { kIdle, kRunning, kCancelled };
std::atomic<int> g_job{kIdle};

// Stops the job before its next batch once hpuTrainerCancelJob was called.
// Batches start between whole steps, and checkpoints are written inside a
// hook that runs to its end, so the job leaves only whole checkpoint files.
class Cancellation : public hpu::Callback {
 public:
  std::string state_key() const override { return "Cancellation"; }
  void on_train_batch_start(hpu::Trainer &t, int64_t batch) override { check(t, "training", batch); }
  void on_validation_batch_start(hpu::Trainer &t, int64_t batch) override { check(t, "validation", batch); }
  void on_test_batch_start(hpu::Trainer &t, int64_t batch) override { check(t, "test", batch); }

 private:
  static void check(const hpu::Trainer &t, const char *stage, int64_t batch) {
    if (g_job.load(std::memory_order_relaxed) != kCancelled) return;
    hpu::detail::fail(HPU_ERROR_ABORTED,
                      "cancelled by hpuTrainerCancelJob before %s batch %lld (epoch %lld, global step %lld)", stage,
                      static_cast<long long>(batch), static_cast<long long>(t.current_epoch()),
                      static_cast<long long>(t.global_step()));
  }
};

}  // namespace

extern "C" HPU_API hpuStatus_t hpuTrainerCancelJob(void) {
  int state = kRunning;
  if (g_job.compare_exchange_strong(state, kCancelled) || state == kCancelled) return HPU_SUCCESS;
  return failed(HPU_ERROR_INVALID_USAGE, "no job is running in this process", "hpuTrainerCancelJob");
}

extern "C" HPU_API hpuStatus_t hpuTrainerRunJob(const char *job_json, const char *job_name, char **result_json) {
  if (!result_json) return failed(HPU_ERROR_INVALID_ARGUMENT, "result_json is NULL");
  if (!job_json) return failed(HPU_ERROR_INVALID_ARGUMENT, "job_json is NULL");
  int idle = kIdle;
  if (!g_job.compare_exchange_strong(idle, kRunning))
    return failed(HPU_ERROR_INVALID_USAGE, "another job is running in this process; one runs at a time");
  struct Done {
    ~Done() { g_job.store(kIdle); }
  } done;
  try {
    const hpu::Job job = hpu::parse_job(job_json, job_name ? job_name : "<job>");
    const auto cancellable = [](hpu::Trainer &t) { t.callbacks().emplace_back(Cancellation{}); };
    const std::string text = result_text(hpu::run_job(job, cancellable));
    char *out = static_cast<char *>(std::malloc(text.size() + 1));  // hpuFree releases it
    if (!out) throw std::bad_alloc();
    std::memcpy(out, text.c_str(), text.size() + 1);
    *result_json = out;
    return HPU_SUCCESS;
  } catch (const hpu::Error &e) {
    return failed(e.status(), e.what());
  } catch (const std::bad_alloc &) {
    return failed(HPU_ERROR_OUT_OF_MEMORY, "host memory exhausted");
  } catch (const std::exception &e) {
    return failed(HPU_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return failed(HPU_ERROR_INTERNAL, "internal error: unknown exception");
  }
}
