// Predictions: their files, the weights a prediction (or a validation or
// test) loads from a checkpoint, and predict_step outside the trainer.
#include <hpu/trainer/trainer.hpp>

#include "error.hpp"
#include "fs.hpp"
#include "json.hpp"
#include "log.hpp"
#include "npy.hpp"
#include "predict.hpp"
#include "run.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace hpu {

using detail::fail;

namespace {

std::string join(const std::vector<std::string> &v) {
  std::string s;
  for (const auto &x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// ---- files -------------------------------------------------------------------

void write_csv(const std::string &path, const Predictions &p) {
  std::string text;
  for (size_t k = 0; k < p.columns.size(); ++k) text += (k ? "," : "") + detail::csv_field(p.columns[k]);
  text += "\n";
  const size_t cols = p.columns.size();
  for (size_t r = 0; r < p.rows(); ++r) {
    for (size_t k = 0; k < cols; ++k) text += (k ? "," : "") + detail::number_text(p.values[r * cols + k], true);
    text += "\n";
  }
  detail::write_file_atomic(path, text.data(), text.size());
}

// A float64 array [rows, columns] (the column names are those of the CSV).
void write_npy_rows(const std::string &path, const Predictions &p) {
  write_npy(path, {int64_t(p.rows()), int64_t(p.columns.size())}, NpyType::f64, p.values.data());
}

// The formats write_predictions knows, by extension.
struct Format {
  const char *extension;
  void (*write)(const std::string &path, const Predictions &p);
};
const Format kFormats[] = {{".csv", write_csv}, {".npy", write_npy_rows}};

std::string extension(const std::string &path) {
  const size_t slash = path.rfind('/'), dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  return path.substr(dot);
}

}  // namespace

void Predictions::append(const Predictions &more) {
  if (more.columns.empty() && more.values.empty()) return;
  if (columns.empty() && values.empty()) columns = more.columns;
  else if (more.columns != columns)
    fail(HPU_ERROR_INVALID_ARGUMENT, "predictions with columns [%s] cannot follow predictions with columns [%s]",
         join(more.columns).c_str(), join(columns).c_str());
  if (columns.empty() || more.values.size() % columns.size() != 0)
    fail(HPU_ERROR_INVALID_ARGUMENT, "predictions hold %zu values for %zu columns; expected a whole number of rows",
         more.values.size(), columns.size());
  values.insert(values.end(), more.values.begin(), more.values.end());
}

namespace {

const Format &format_of(const std::string &path) {
  if (path.empty()) fail(HPU_ERROR_INVALID_ARGUMENT, "the predictions file's path is empty");
  const std::string ext = extension(path);
  std::string known;
  for (const Format &f : kFormats) {
    if (ext == f.extension) return f;
    known += std::string(known.empty() ? "" : ", ") + f.extension;
  }
  fail(HPU_ERROR_UNSUPPORTED, "predictions file %s: %s is not a supported format (supported: %s)", path.c_str(),
       ext.empty() ? "a name without an extension" : ("the extension \"" + ext + "\"").c_str(), known.c_str());
}

}  // namespace

void check_predictions_path(const std::string &path) { format_of(path); }

void write_predictions(const std::string &path, const Predictions &p) { format_of(path).write(path, p); }

// ---- weights from checkpoints --------------------------------------------------

void detail::load_state_dict(const Checkpoint &ck, const std::vector<Parameter *> &params, const std::string &source) {
  const std::string prefix = "state_dict/";
  std::set<std::string> wanted;
  for (Parameter *p : params) {
    const std::string key = prefix + p->name;
    wanted.insert(key);
    auto it = ck.tensors.find(key);
    if (it == ck.tensors.end())
      fail(HPU_ERROR_INVALID_ARGUMENT, "%s: the checkpoint lacks the weights of %s (a checkpoint of another model?)",
           source.c_str(), p->name.c_str());
    const CheckpointTensor &c = it->second;
    if (c.shape != p->value.shape())
      fail(HPU_ERROR_INVALID_ARGUMENT,
           "%s: the checkpoint's %s has shape %s, the model's has shape %s (a checkpoint of another model?)",
           source.c_str(), p->name.c_str(), shape_text(c.shape).c_str(), shape_text(p->value.shape()).c_str());
    if (c.dtype != p->value.dtype())
      fail(HPU_ERROR_INVALID_ARGUMENT, "%s: the checkpoint's %s has dtype %d, the model's has dtype %d (hpuDataType_t)",
           source.c_str(), p->name.c_str(), int(c.dtype), int(p->value.dtype()));
    p->value.copy_from_host(c.bytes.data(), c.bytes.size());
  }
  for (const auto &kv : ck.tensors)
    if (kv.first.rfind(prefix, 0) == 0 && !wanted.count(kv.first))
      fail(HPU_ERROR_INVALID_ARGUMENT, "%s: the checkpoint holds weights %s, which the model lacks (a checkpoint of "
           "another model?)", source.c_str(), kv.first.substr(prefix.size()).c_str());
}

void detail::load_into(LightningModule &model, const Checkpoint &ck, const std::string &source, hpuDevice_t dev) {
  Rng init(0);  // overwritten by the checkpoint's weights
  model.setup_device(dev, init);
  model.on_load_checkpoint(ck);  // as Lightning's load_from_checkpoint: before the weights load
  load_state_dict(ck, model.parameters(), source);
}

void load_from_checkpoint(LightningModule &model, const std::string &path, hpuDevice_t dev) {
  detail::load_into(model, load_checkpoint_file(path), path, dev);
}

std::string Trainer::checkpoint_file(const std::string &ckpt_path, Stage stage) const {
  if (ckpt_path != "best" && ckpt_path != "last") return ckpt_path;
  const char *fn = stage_name(stage);
  const ModelCheckpoint *mc = nullptr;
  for (const auto &c : callbacks_)
    if (!mc) mc = dynamic_cast<const ModelCheckpoint *>(c.get());
  if (ckpt_path == "best") {
    if (!mc)
      fail(HPU_ERROR_INVALID_ARGUMENT,
           "%s: ckpt_path is \"best\", but the trainer has no ModelCheckpoint callback to have saved a best checkpoint",
           fn);
    if (mc->best_model_path().empty())
      fail(HPU_ERROR_INVALID_USAGE,
           "%s: ckpt_path is \"best\", but ModelCheckpoint has saved no checkpoint yet (fit first, or give a "
           "checkpoint's path)",
           fn);
    return mc->best_model_path();
  }
  // As Lightning: "last" with no last checkpoint is not an error.
  if (mc && !mc->last_model_path().empty() && detail::exists(mc->last_model_path())) return mc->last_model_path();
  detail::log(HPU_LOG_WARN,
              "%s: ckpt_path is \"last\", but there is no last checkpoint (ModelCheckpoint's save_last); the current "
              "weights are used",
              fn);
  return "";
}

void Trainer::load_weights(const std::string &ckpt_path, Stage stage) {
  const std::string path = checkpoint_file(ckpt_path, stage);
  if (path.empty()) return;
  const Checkpoint ck = load_checkpoint_file(path);
  for (Replica &r : run_->reps) {
    check(hpuDeviceSynchronize(r.dev));
    r.model->on_load_checkpoint(ck);
    detail::load_state_dict(ck, r.params, path);
    r.plan.values_changed();
  }
  detail::log(HPU_LOG_INFO, "%s: weights from %s", stage_name(stage), path.c_str());
}

// ---- predict_step ---------------------------------------------------------------

Predictions LightningModule::predict_step(Context &, const Tensor &) {
  fail(HPU_ERROR_UNSUPPORTED, "this LightningModule does not override predict_step");
}

Predictions predict_samples(LightningModule &model, hpuDevice_t dev, const float *x,
                            const std::vector<int64_t> &shape, int64_t batch_size, bool bf16) {
  int64_t sample = 1;
  for (size_t d = 1; d < shape.size(); ++d) sample *= shape[d];
  Context ctx;
  check(hpuDeviceGetDefaultStream(dev, &ctx.stream));
  ctx.training = false;
  if (bf16) check(hpuAutocastPush(1, HPU_BFLOAT16));
  struct Pop {
    bool on;
    ~Pop() {
      if (on) hpuAutocastPop();
    }
  } pop{bf16};
  Predictions out;
  for (int64_t start = 0; start < shape[0]; start += batch_size) {
    std::vector<int64_t> s = shape;
    s[0] = std::min(batch_size, shape[0] - start);
    Tensor batch = Tensor::from_host(dev, HPU_FLOAT32, s, x + start * sample);
    Predictions p = model.predict_step(ctx, batch);
    if (p.rows() != size_t(s[0]) || p.values.size() != p.rows() * p.columns.size())
      fail(HPU_ERROR_INVALID_ARGUMENT, "predict_step returned %zu rows of %zu columns (%zu values) for %lld samples",
           p.rows(), p.columns.size(), p.values.size(), (long long)s[0]);
    out.append(p);
  }
  check(hpuDeviceSynchronize(dev));
  return out;
}

}  // namespace hpu
