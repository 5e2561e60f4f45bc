// hpuTrainerRunJob: hpu-train's job run in-process, for C programs and the
// bindings; hpuTrainerCancelJob stops it from another thread;
// hpuTrainerPredict: a checkpoint's model predicting from host memory.
// Failures become a status and libhpu's last error message.
#include <hpu/hpu.hpp>
#include <hpu/trainer.h>
#include <hpu/trainer/job.hpp>
#include <hpu/trainer/trainer.hpp>

#include "error.hpp"
#include "job_control.hpp"
#include "json.hpp"

#include <algorithm>
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

json_t *strings(const std::vector<std::string> &v) {
  json_t *a = json_array();
  for (const auto &s : v) json_array_append_new(a, json_string(s.c_str()));
  return a;
}

std::string result_text(const hpu::JobResult &r) {
  hpu::detail::Json o(json_object());
  json_object_set_new(o.get(), "command", json_string(r.command.c_str()));
  json_object_set_new(o.get(), "metrics", metrics_object(r.metrics));
  json_object_set_new(o.get(), "validate", metrics_object(r.validate));
  json_object_set_new(o.get(), "test", metrics_object(r.test));
  json_t *pred = json_null();
  if (r.command == "predict") {
    pred = json_object();
    json_object_set_new(pred, "output", json_string(r.predictions_path.c_str()));
    json_object_set_new(pred, "rows", json_integer(json_int_t(r.predictions.rows())));
    json_object_set_new(pred, "columns", strings(r.predictions.columns));
  }
  json_object_set_new(o.get(), "predict", pred);
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

// The text of a JSON value returned to C, released with hpuFree.
char *c_copy(const std::string &text) {
  char *out = static_cast<char *>(std::malloc(text.size() + 1));
  if (!out) throw std::bad_alloc();
  std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

// The failure of a C call from the exception it threw.
hpuStatus_t failed_with(const char *fn) noexcept {
  try {
    throw;
  } catch (const hpu::Error &e) {
    return failed(e.status(), e.what(), fn);
  } catch (const std::bad_alloc &) {
    return failed(HPU_ERROR_OUT_OF_MEMORY, "host memory exhausted", fn);
  } catch (const std::exception &e) {
    return failed(HPU_ERROR_INTERNAL, std::string("internal error: ") + e.what(), fn);
  } catch (...) {
    return failed(HPU_ERROR_INTERNAL, "internal error: unknown exception", fn);
  }
}

// The caller's options over the defaults, as libhpu reads its sized structs:
// a caller built against an older (smaller) struct has the fields it knows.
hpuTrainerPredictOptions_t predict_options(const hpuTrainerPredictOptions_t *in) {
  hpuTrainerPredictOptions_t o = HPU_TRAINER_PREDICT_OPTIONS_INIT;
  if (!in) return o;
  if (in->struct_size <= sizeof(size_t) || in->struct_size > (size_t(1) << 16))
    hpu::detail::fail(HPU_ERROR_INVALID_ARGUMENT,
                      "options->struct_size is %zu; set it with HPU_TRAINER_PREDICT_OPTIONS_INIT (%zu)",
                      in->struct_size, sizeof o);
  const size_t n = std::min(in->struct_size, sizeof o);
  std::memcpy(reinterpret_cast<char *>(&o) + sizeof(size_t), reinterpret_cast<const char *>(in) + sizeof(size_t),
              n - sizeof(size_t));
  return o;
}

std::string predict_text(const char *ckpt_path, const float *x, int ndim, const int64_t *shape,
                         const hpuTrainerPredictOptions_t *options) {
  using hpu::detail::fail;
  if (!ckpt_path) fail(HPU_ERROR_INVALID_ARGUMENT, "ckpt_path is NULL");
  if (!x) fail(HPU_ERROR_INVALID_ARGUMENT, "x is NULL");
  if (ndim < 2 || ndim > 8)
    fail(HPU_ERROR_INVALID_ARGUMENT, "ndim is %d; expected 2 to 8 (samples, then each sample's dimensions)", ndim);
  if (!shape) fail(HPU_ERROR_INVALID_ARGUMENT, "shape is NULL");
  uint64_t total = 1;
  for (int d = 0; d < ndim; ++d) {
    if (shape[d] < 1 || shape[d] > (int64_t(1) << 40))
      fail(HPU_ERROR_INVALID_ARGUMENT, "shape[%d] is %lld; expected 1 to 2^40", d, static_cast<long long>(shape[d]));
    if (total > (uint64_t(1) << 40) / uint64_t(shape[d]))
      fail(HPU_ERROR_INVALID_ARGUMENT, "shape gives more than 2^40 elements (shape[%d] is %lld)", d,
           static_cast<long long>(shape[d]));
    total *= uint64_t(shape[d]);
  }
  const hpuTrainerPredictOptions_t o = predict_options(options);
  int count = 0;
  hpu::check(hpuDeviceCount(&count));
  if (o.device < 0 || o.device >= count)
    fail(HPU_ERROR_INVALID_ARGUMENT, "options->device is %d; this process has %d device(s)", o.device, count);
  if (o.batch_size < 0)
    fail(HPU_ERROR_INVALID_ARGUMENT, "options->batch_size is %lld; expected >= 0 (0: 256)",
         static_cast<long long>(o.batch_size));
  const std::string precision = o.precision ? o.precision : "32-true";
  if (precision != "32-true" && precision != "bf16-mixed")
    fail(HPU_ERROR_INVALID_ARGUMENT, "options->precision is \"%s\"; expected \"32-true\" or \"bf16-mixed\"",
         precision.c_str());

  hpu::Device dev(o.device);
  std::unique_ptr<hpu::Classifier> model = hpu::Classifier::load_from_checkpoint(ckpt_path, dev.get());
  const hpu::Predictions p = hpu::predict_samples(*model, dev.get(), x, std::vector<int64_t>(shape, shape + ndim),
                                                  o.batch_size ? o.batch_size : 256, precision == "bf16-mixed");
  hpu::detail::Json out(json_object());
  json_object_set_new(out.get(), "columns", strings(p.columns));
  json_t *rows = json_array();
  for (size_t r = 0; r < p.rows(); ++r) {
    json_t *row = json_array();
    for (size_t k = 0; k < p.columns.size(); ++k) {
      const double v = p.values[r * p.columns.size() + k];
      json_array_append_new(row, v == std::trunc(v) && std::fabs(v) < 9007199254740992.0 ? json_integer(json_int_t(v))
                                                                                          : number(v));
    }
    json_array_append_new(rows, row);
  }
  json_object_set_new(out.get(), "predictions", rows);
  return hpu::detail::dump(out.get(), JSON_COMPACT | JSON_PRESERVE_ORDER);
}

}  // namespace

extern "C" HPU_API hpuStatus_t hpuTrainerPredict(const char *ckpt_path, const float *x, int ndim, const int64_t *shape,
                                                 const hpuTrainerPredictOptions_t *options, char **result_json) {
  if (!result_json) return failed(HPU_ERROR_INVALID_ARGUMENT, "result_json is NULL", "hpuTrainerPredict");
  try {
    *result_json = c_copy(predict_text(ckpt_path, x, ndim, shape, options));
    return HPU_SUCCESS;
  } catch (...) {
    return failed_with("hpuTrainerPredict");
  }
}

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
    *result_json = c_copy(result_text(hpu::run_job(job)));
    return HPU_SUCCESS;
  } catch (...) {
    return failed_with("hpuTrainerRunJob");
  }
}
