// hpuTrainerRunJob: hpu-train's job run in-process, for C programs and the
// bindings; hpuTrainerCancelJob stops it from another thread. Failures become
// a status and libhpu's last error message.
#include <hpu/hpu.hpp>
#include <hpu/trainer.h>
#include <hpu/trainer/job.hpp>
#include <hpu/trainer/trainer.hpp>

#include "error.hpp"
#include "job_control.hpp"
#include "json.hpp"

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

}  // namespace

extern "C" HPU_API hpuStatus_t hpuTrainerCancelJob(void) {
  if (hpu::detail::cancel_job()) return HPU_SUCCESS;
  return failed(HPU_ERROR_INVALID_USAGE, "no job is running in this process", "hpuTrainerCancelJob");
}

extern "C" HPU_API hpuStatus_t hpuTrainerRunJob(const char *job_json, const char *job_name, char **result_json) {
  if (!result_json) return failed(HPU_ERROR_INVALID_ARGUMENT, "result_json is NULL");
  if (!job_json) return failed(HPU_ERROR_INVALID_ARGUMENT, "job_json is NULL");
  try {
    // run_job refuses a second job and stops when hpuTrainerCancelJob asks.
    const hpu::Job job = hpu::parse_job(job_json, job_name ? job_name : "<job>");
    const std::string text = result_text(hpu::run_job(job));
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
