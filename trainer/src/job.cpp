// hpu-train job documents: jansson for values, job_locator for lines.
#include <hpu/trainer/callbacks.hpp>
#include <hpu/trainer/job.hpp>

#include "error.hpp"
#include "fs.hpp"
#include "job_locator.hpp"
#include "json.hpp"

#include <climits>
#include <cmath>
#include <set>

namespace hpu {

using detail::fail;
using detail::format;

namespace {

// Where values came from, for messages: "<source>:<line>: <key>: <problem>" or
// "<flag>: <key>: <problem>" for a command-line override.
struct Ctx {
  std::string source;
  std::map<std::string, int> lines;
  std::map<std::string, std::string> flags;

  std::string where(const std::string &path) const {
    auto f = flags.find(path);
    if (f != flags.end()) return "command line " + f->second + ": " + path;
    // The nearest enclosing key with a line.
    for (std::string p = path;;) {
      auto it = lines.find(p);
      if (it != lines.end()) return format("%s:%d: %s", source.c_str(), it->second, path.c_str());
      size_t cut = p.find_last_of(".[");
      if (cut == std::string::npos) return source + ": " + path;
      p = p.substr(0, cut);
    }
  }
  [[noreturn]] void error(const std::string &path, const std::string &problem) const {
    fail(HPU_ERROR_CONFIG, "%s: %s", where(path).c_str(), problem.c_str());
  }
};

const char *type_name(const json_t *v) {
  switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
  }
  return "?";
}

// Reads the members of one object; finish() rejects the keys it did not read.
// (Not the destructor: an exception from a destructor that runs after a return
// value is built leaks that value with GCC < 13 and clang < 16, CWG 2176.)
class Obj {
 public:
  Obj(const Ctx &c, json_t *o, std::string path) : c_(c), o_(o), path_(std::move(path)) {
    if (!json_is_object(o)) c.error(path_, std::string("expected an object, found ") + type_name(o));
  }
  void finish() const {
    const char *k;
    json_t *v;
    json_object_foreach(o_, k, v) {
      (void)v;
      if (!used_.count(k)) c_.error(key(k), "unknown key" + known());
    }
  }
  std::string key(const std::string &k) const { return path_.empty() ? k : path_ + "." + k; }
  json_t *get(const char *k) {
    used_.insert(k);
    allowed_.insert(k);
    return json_object_get(o_, k);
  }
  void allow(const char *k) { allowed_.insert(k), used_.insert(k); }

  template <class T>
  void integer(const char *k, T &out, long long lo, long long hi) {
    json_t *v = get(k);
    if (!v) return;
    if (!json_is_integer(v)) c_.error(key(k), std::string("expected an integer, found ") + type_name(v));
    long long x = json_integer_value(v);
    if (x < lo || x > hi) c_.error(key(k), format("%lld is out of range [%lld, %lld]", x, lo, hi));
    out = T(x);
  }
  void number(const char *k, double &out, double lo, double hi) {
    json_t *v = get(k);
    if (!v) return;
    if (!json_is_number(v)) c_.error(key(k), std::string("expected a number, found ") + type_name(v));
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) c_.error(key(k), format("%g is out of range [%g, %g]", x, lo, hi));
    out = x;
  }
  void boolean(const char *k, bool &out) {
    json_t *v = get(k);
    if (!v) return;
    if (!json_is_boolean(v)) c_.error(key(k), std::string("expected true or false, found ") + type_name(v));
    out = json_is_true(v);
  }
  void string(const char *k, std::string &out, std::initializer_list<const char *> accepted = {}) {
    json_t *v = get(k);
    if (!v) return;
    if (!json_is_string(v)) c_.error(key(k), std::string("expected a string, found ") + type_name(v));
    std::string s = json_string_value(v);
    if (accepted.size()) {
      std::string list;
      bool ok = false;
      for (const char *a : accepted) {
        ok |= s == a;
        list += std::string(list.empty() ? "" : ", ") + "\"" + a + "\"";
      }
      if (!ok) c_.error(key(k), "\"" + s + "\" is not one of " + list);
    }
    out = s;
  }

 private:
  std::string known() const {
    std::string s;
    for (const auto &a : allowed_) s += (s.empty() ? "; known keys: " : ", ") + a;
    return s;
  }
  const Ctx &c_;
  json_t *o_;
  std::string path_;
  std::set<std::string> used_, allowed_;
};

BatchCount batch_count(const Ctx &c, json_t *v, const std::string &path) {
  if (json_is_integer(v)) return BatchCount(int64_t(json_integer_value(v)));
  if (json_is_real(v)) return BatchCount(json_real_value(v));
  c.error(path, std::string("expected a number of batches (integer) or a fraction (number), found ") + type_name(v));
}

std::vector<LayerSpec> read_layers(const Ctx &c, json_t *model, const DataSpec &data) {
  Obj m(c, model, "model");
  json_t *arr = m.get("layers");
  if (!arr) c.error("model", "missing key \"layers\"");
  if (!json_is_array(arr) || json_array_size(arr) == 0) c.error("model.layers", "expected a non-empty array of layers");
  std::vector<LayerSpec> layers;
  // The feature width flowing between layers, when known (Fashion-MNIST: 28x28).
  int64_t width = 0;
  bool flat = false;
  const int64_t sample = data.name == "fashion_mnist" ? 784 : 0;
  for (size_t i = 0; i < json_array_size(arr); ++i) {
    const std::string path = format("model.layers[%zu]", i);
    Obj o(c, json_array_get(arr, i), path);
    LayerSpec l;
    o.string("type", l.type, {"linear", "relu", "gelu", "dropout", "layernorm", "embedding", "flatten"});
    if (l.type.empty()) c.error(path, "missing key \"type\"");
    if (l.type == "linear") {
      o.integer("in_features", l.in_features, 1, INT32_MAX);
      o.integer("out_features", l.out_features, 1, INT32_MAX);
      o.boolean("bias", l.bias);
      if (!l.in_features) c.error(path, "missing key \"in_features\"");
      if (!l.out_features) c.error(path, "missing key \"out_features\"");
      if (!flat && sample) c.error(path, "a linear layer on unflattened images; put a \"flatten\" layer first");
      if (width && l.in_features != width)
        c.error(o.key("in_features"),
                format("%lld, but the previous layer gives %lld features", (long long)l.in_features, (long long)width));
      width = l.out_features;
    } else if (l.type == "dropout") {
      o.number("p", l.p, 0.0, 0.999999);
    } else if (l.type == "layernorm") {
      o.integer("normalized_shape", l.normalized_shape, 1, INT32_MAX);
      o.number("eps", l.eps, 1e-30, 1.0);
      if (!l.normalized_shape) c.error(path, "missing key \"normalized_shape\"");
      if (width && l.normalized_shape != width)
        c.error(o.key("normalized_shape"), format("%lld, but the previous layer gives %lld features",
                                                  (long long)l.normalized_shape, (long long)width));
    } else if (l.type == "embedding") {
      o.integer("num_embeddings", l.num_embeddings, 1, INT32_MAX);
      o.integer("embedding_dim", l.embedding_dim, 1, INT32_MAX);
      if (!l.num_embeddings || !l.embedding_dim) c.error(path, "needs \"num_embeddings\" and \"embedding_dim\"");
      width = l.embedding_dim;
    } else if (l.type == "flatten") {
      flat = true;
      if (sample && !width) width = sample;
    }
    o.finish();
    layers.push_back(l);
  }
  if (width && data.name == "fashion_mnist" && width != 10)
    c.error(format("model.layers[%zu]", layers.size() - 1),
            format("the model ends with %lld features; Fashion-MNIST's cross-entropy needs 10 class scores",
                   (long long)width));
  m.finish();
  return layers;
}

Ref<Callback> build_callback(const Ctx &c, Obj &o, json_t *v, const std::string &path) {
  std::string type;
  o.string("type", type, {"DeviceStatsMonitor", "ModelCheckpoint", "EarlyStopping", "LearningRateMonitor", "ProgressBar"});
  if (type.empty()) c.error(path, "missing key \"type\"");
  try {
    if (type == "DeviceStatsMonitor") return DeviceStatsMonitor{};
    if (type == "ModelCheckpoint") {
      ModelCheckpointOptions m;
      o.string("dirpath", m.dirpath);
      o.string("filename", m.filename);
      o.string("monitor", m.monitor);
      o.string("mode", m.mode, {"min", "max"});
      o.integer("save_top_k", m.save_top_k, -1, INT32_MAX);
      o.boolean("save_last", m.save_last);
      o.integer("every_n_epochs", m.every_n_epochs, 0, INT32_MAX);
      o.integer("every_n_train_steps", m.every_n_train_steps, 0, INT64_MAX);
      return ModelCheckpoint(m);
    }
    if (type == "EarlyStopping") {
      EarlyStoppingOptions e;
      o.string("monitor", e.monitor);
      o.number("min_delta", e.min_delta, -1e300, 1e300);
      o.integer("patience", e.patience, 0, INT32_MAX);
      o.string("mode", e.mode, {"min", "max"});
      o.boolean("strict", e.strict);
      o.boolean("check_finite", e.check_finite);
      o.boolean("check_on_train_epoch_end", e.check_on_train_epoch_end);
      double t = 0;
      if (json_object_get(v, "stopping_threshold")) o.number("stopping_threshold", t, -1e300, 1e300), e.stopping_threshold = t;
      if (json_object_get(v, "divergence_threshold"))
        o.number("divergence_threshold", t, -1e300, 1e300), e.divergence_threshold = t;
      return EarlyStopping(e);
    }
    if (type == "LearningRateMonitor") {
      std::string interval;
      bool momentum = false;
      o.string("logging_interval", interval, {"step", "epoch"});
      o.boolean("log_momentum", momentum);
      return LearningRateMonitor(interval, momentum);
    }
    int refresh = 0;
    o.integer("refresh_rate", refresh, 0, INT32_MAX);
    return ProgressBar(refresh);
  } catch (const Error &e) {
    if (e.status() == HPU_ERROR_CONFIG) throw;
    c.error(path, e.what());
  }
}

Ref<Callback> read_callback(const Ctx &c, json_t *v, const std::string &path) {
  Obj o(c, v, path);
  Ref<Callback> cb = build_callback(c, o, v, path);
  o.finish();
  return cb;
}

Loggers read_loggers(const Ctx &c, json_t *v, const std::string &root) {
  if (json_is_boolean(v)) return Loggers(json_is_true(v));
  std::vector<json_t *> items;
  if (json_is_array(v)) {
    for (size_t i = 0; i < json_array_size(v); ++i) items.push_back(json_array_get(v, i));
  } else {
    items.push_back(v);
  }
  Loggers out(true);
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string path = json_is_array(v) ? format("trainer.logger[%zu]", i) : "trainer.logger";
    const char *name = json_string_value(items[i]);
    if (!name) c.error(path, std::string("expected \"csv\", \"jsonl\", true or false, found ") + type_name(items[i]));
    if (std::string(name) == "csv") {
      out.list.emplace_back(CSVLogger(root));
    } else if (std::string(name) == "jsonl") {
      out.list.emplace_back(JsonLinesLogger(root));
    } else {
      c.error(path, format("\"%s\" is not one of \"csv\", \"jsonl\"", name));
    }
  }
  return out;
}

TrainerOptions read_trainer(const Ctx &c, json_t *t, std::vector<std::string> &specs) {
  TrainerOptions o;
  Obj r(c, t, "trainer");
  r.string("accelerator", o.accelerator);
  if (json_t *d = r.get("devices")) {
    if (json_is_integer(d)) {
      o.devices = Devices(int(json_integer_value(d)));
    } else if (json_is_string(d)) {
      o.devices = Devices(std::string(json_string_value(d)));
    } else {
      c.error("trainer.devices", std::string("expected an integer or \"auto\", found ") + type_name(d));
    }
  }
  r.string("strategy", o.strategy);
  r.string("precision", o.precision);
  r.string("profiler", o.profiler);
  r.integer("num_nodes", o.num_nodes, 1, INT32_MAX);
  if (json_t *e = r.get("max_epochs")) {
    if (!json_is_null(e)) {
      int64_t m = 0;
      r.integer("max_epochs", m, -1, INT64_MAX);
      o.max_epochs = m;
    }
  }
  r.integer("max_steps", o.max_steps, -1, INT64_MAX);
  const std::pair<const char *, BatchCount *> counts[] = {{"limit_train_batches", &o.limit_train_batches},
                                                          {"limit_val_batches", &o.limit_val_batches},
                                                          {"limit_test_batches", &o.limit_test_batches},
                                                          {"val_check_interval", &o.val_check_interval}};
  for (const auto &[k, dst] : counts)
    if (json_t *v = r.get(k)) *dst = batch_count(c, v, r.key(k));
  r.integer("check_val_every_n_epoch", o.check_val_every_n_epoch, 1, INT32_MAX);
  r.integer("log_every_n_steps", o.log_every_n_steps, 1, INT32_MAX);
  r.integer("accumulate_grad_batches", o.accumulate_grad_batches, 1, INT32_MAX);
  r.number("gradient_clip_val", o.gradient_clip_val, 0.0, 1e300);
  if (json_t *s = r.get("seed")) {
    if (!json_is_null(s)) {
      int64_t seed = 0;
      r.integer("seed", seed, 0, INT64_MAX);
      o.seed = uint64_t(seed);
    }
  }
  r.string("default_root_dir", o.default_root_dir);
  r.boolean("enable_progress_bar", o.enable_progress_bar);
  r.boolean("enable_checkpointing", o.enable_checkpointing);
  if (json_t *cbs = r.get("callbacks")) {
    if (!json_is_array(cbs)) c.error("trainer.callbacks", std::string("expected an array, found ") + type_name(cbs));
    for (size_t i = 0; i < json_array_size(cbs); ++i) {
      o.callbacks.push_back(read_callback(c, json_array_get(cbs, i), format("trainer.callbacks[%zu]", i)));
      specs.push_back(detail::dump(json_array_get(cbs, i), JSON_COMPACT | JSON_PRESERVE_ORDER));
    }
  }
  if (json_t *l = r.get("logger")) o.logger = read_loggers(c, l, o.default_root_dir.empty() ? "." : o.default_root_dir);
  // The options' own checks, reported at the option's line. Device counts are
  // checked when the trainer starts, against the devices then visible.
  try {
    TrainerOptions probe = o;
    probe.seed = 0;
    resolve_options(probe, INT_MAX / 2);
  } catch (const Error &e) {
    std::string msg = e.what(), option = msg.substr(0, msg.find(' '));
    c.error(json_object_get(t, option.c_str()) ? "trainer." + option : "trainer", msg);
  }
  r.finish();
  return o;
}

// Sets `key` ("a.b.c") in the document from a command-line value: JSON when it
// parses as a scalar (2, 0.5, true, null), else a string.
void apply_override(json_t *root, const Override &ov) {
  json_t *obj = root;
  size_t start = 0;
  for (;;) {
    size_t dot = ov.key.find('.', start);
    std::string part = ov.key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (dot == std::string::npos) {
      json_error_t err;
      json_t *v = json_loads(ov.value.c_str(), JSON_DECODE_ANY, &err);
      if (!v || json_is_object(v) || json_is_array(v)) {
        json_decref(v);
        v = json_string(ov.value.c_str());
      }
      json_object_set_new(obj, part.c_str(), v);
      return;
    }
    json_t *next = json_object_get(obj, part.c_str());
    if (!json_is_object(next)) {
      next = json_object();
      json_object_set_new(obj, part.c_str(), next);
    }
    obj = next;
    start = dot + 1;
  }
}

}  // namespace

Job parse_job(const std::string &text, const std::string &source, const std::vector<Override> &overrides) {
  json_error_t err;
  detail::Json root(json_loadb(text.data(), text.size(), 0, &err));
  if (!root) fail(HPU_ERROR_CONFIG, "%s:%d: JSON syntax error: %s", source.c_str(), err.line, err.text);
  Ctx c{source, detail::json_key_lines(text), {}};
  if (!json_is_object(root.get())) c.error("(document)", std::string("expected an object, found ") + type_name(root.get()));
  for (const auto &ov : overrides) {
    apply_override(root.get(), ov);
    c.flags[ov.key] = ov.flag;
  }

  Job job;
  Obj top(c, root.get(), "");
  if (json_t *d = top.get("data")) {
    Obj o(c, d, "data");
    o.string("name", job.data.name, {"fashion_mnist"});
    o.string("root", job.data.root);
    o.integer("batch_size", job.data.batch_size, 1, INT32_MAX);
    o.integer("val_size", job.data.val_size, 0, 59999);
    o.finish();
  }
  json_t *model = top.get("model");
  if (!model) c.error("(document)", "missing key \"model\"");
  job.layers = read_layers(c, model, job.data);
  if (json_t *o = top.get("optimizer")) {
    Obj r(c, o, "optimizer");
    OptimizerSpec &s = job.optimizer;
    r.string("name", s.name, {"sgd", "adamw"});
    r.number("lr", s.lr, 0.0, 1e6);
    r.number("momentum", s.momentum, 0.0, 1.0);
    r.boolean("nesterov", s.nesterov);
    r.number("weight_decay", s.weight_decay, 0.0, 1e6);
    r.number("beta1", s.beta1, 0.0, 0.999999);
    r.number("beta2", s.beta2, 0.0, 0.999999999);
    r.number("eps", s.eps, 1e-30, 1.0);
    if (s.nesterov && s.momentum == 0.0) c.error("optimizer.nesterov", "nesterov needs a momentum > 0");
    r.finish();
  }
  if (json_t *o = top.get("scheduler")) {
    Obj r(c, o, "scheduler");
    SchedulerSpec &s = job.scheduler;
    r.string("name", s.name, {"none", "step", "cosine"});
    r.integer("step_size", s.step_size, 1, INT64_MAX);
    r.number("gamma", s.gamma, 1e-30, 1e6);
    r.integer("warmup_steps", s.warmup_steps, 0, INT64_MAX);
    r.integer("total_steps", s.total_steps, 0, INT64_MAX);
    r.number("min_lr", s.min_lr, 0.0, 1e6);
    r.string("interval", s.interval, {"step", "epoch"});
    if (s.name == "cosine" && s.total_steps && s.total_steps <= s.warmup_steps)
      c.error("scheduler.total_steps", format("%lld; expected more than warmup_steps (%lld)", (long long)s.total_steps,
                                              (long long)s.warmup_steps));
    if (s.min_lr > job.optimizer.lr) c.error("scheduler.min_lr", format("%g exceeds optimizer.lr %g", s.min_lr, job.optimizer.lr));
    r.finish();
  }
  if (json_t *t = top.get("trainer")) job.trainer = read_trainer(c, t, job.callback_specs);
  top.string("ckpt_path", job.ckpt_path);
  top.boolean("test", job.test);
  top.finish();
  return job;
}

Job load_job(const std::string &path, const std::vector<Override> &overrides) {
  return parse_job(detail::read_file(path), path, overrides);
}

namespace {

json_t *count_json(const BatchCount &b) {
  return b.fraction ? json_real(*b.fraction) : json_integer(json_int_t(b.batches));
}

}  // namespace

std::string job_to_json(const Job &job) {
  detail::Json root(json_object());
  json_t *layers = json_array();
  for (const auto &l : job.layers) {
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string(l.type.c_str()));
    if (l.type == "linear") {
      json_object_set_new(o, "in_features", json_integer(l.in_features));
      json_object_set_new(o, "out_features", json_integer(l.out_features));
      json_object_set_new(o, "bias", json_boolean(l.bias));
    } else if (l.type == "dropout") {
      json_object_set_new(o, "p", json_real(l.p));
    } else if (l.type == "layernorm") {
      json_object_set_new(o, "normalized_shape", json_integer(l.normalized_shape));
      json_object_set_new(o, "eps", json_real(l.eps));
    } else if (l.type == "embedding") {
      json_object_set_new(o, "num_embeddings", json_integer(l.num_embeddings));
      json_object_set_new(o, "embedding_dim", json_integer(l.embedding_dim));
    }
    json_array_append_new(layers, o);
  }
  json_t *model = json_object();
  json_object_set_new(model, "layers", layers);
  json_object_set_new(root.get(), "model", model);

  json_t *data = json_object();
  json_object_set_new(data, "name", json_string(job.data.name.c_str()));
  json_object_set_new(data, "root", json_string(job.data.root.c_str()));
  json_object_set_new(data, "batch_size", json_integer(job.data.batch_size));
  json_object_set_new(data, "val_size", json_integer(job.data.val_size));
  json_object_set_new(root.get(), "data", data);

  const OptimizerSpec &os = job.optimizer;
  json_t *opt = json_object();
  json_object_set_new(opt, "name", json_string(os.name.c_str()));
  json_object_set_new(opt, "lr", json_real(os.lr));
  if (os.name == "sgd") {
    json_object_set_new(opt, "momentum", json_real(os.momentum));
    json_object_set_new(opt, "nesterov", json_boolean(os.nesterov));
  } else {
    json_object_set_new(opt, "beta1", json_real(os.beta1));
    json_object_set_new(opt, "beta2", json_real(os.beta2));
    json_object_set_new(opt, "eps", json_real(os.eps));
  }
  json_object_set_new(opt, "weight_decay", json_real(os.weight_decay));
  json_object_set_new(root.get(), "optimizer", opt);

  const SchedulerSpec &ss = job.scheduler;
  json_t *sch = json_object();
  json_object_set_new(sch, "name", json_string(ss.name.c_str()));
  if (ss.name == "step") {
    json_object_set_new(sch, "step_size", json_integer(ss.step_size));
    json_object_set_new(sch, "gamma", json_real(ss.gamma));
  } else if (ss.name == "cosine") {
    json_object_set_new(sch, "warmup_steps", json_integer(ss.warmup_steps));
    json_object_set_new(sch, "total_steps", json_integer(ss.total_steps));
    json_object_set_new(sch, "min_lr", json_real(ss.min_lr));
  }
  if (!ss.interval.empty()) json_object_set_new(sch, "interval", json_string(ss.interval.c_str()));
  json_object_set_new(root.get(), "scheduler", sch);

  const TrainerOptions &t = job.trainer;
  json_t *tr = json_object();
  json_object_set_new(tr, "accelerator", json_string(t.accelerator.c_str()));
  json_object_set_new(tr, "devices", t.devices.text.empty() ? json_integer(t.devices.count)
                                                            : json_string(t.devices.text.c_str()));
  json_object_set_new(tr, "strategy", json_string(t.strategy.c_str()));
  json_object_set_new(tr, "precision", json_string(t.precision.c_str()));
  json_object_set_new(tr, "profiler", json_string(t.profiler.c_str()));
  json_object_set_new(tr, "num_nodes", json_integer(t.num_nodes));
  json_object_set_new(tr, "max_epochs", t.max_epochs ? json_integer(*t.max_epochs) : json_null());
  json_object_set_new(tr, "max_steps", json_integer(t.max_steps));
  json_object_set_new(tr, "limit_train_batches", count_json(t.limit_train_batches));
  json_object_set_new(tr, "limit_val_batches", count_json(t.limit_val_batches));
  json_object_set_new(tr, "limit_test_batches", count_json(t.limit_test_batches));
  json_object_set_new(tr, "val_check_interval", count_json(t.val_check_interval));
  json_object_set_new(tr, "check_val_every_n_epoch", json_integer(t.check_val_every_n_epoch));
  json_object_set_new(tr, "log_every_n_steps", json_integer(t.log_every_n_steps));
  json_object_set_new(tr, "accumulate_grad_batches", json_integer(t.accumulate_grad_batches));
  json_object_set_new(tr, "gradient_clip_val", json_real(t.gradient_clip_val));
  json_object_set_new(tr, "seed", t.seed ? json_integer(json_int_t(*t.seed)) : json_null());
  json_object_set_new(tr, "default_root_dir", json_string(t.default_root_dir.c_str()));
  json_t *cbs = json_array();
  for (const auto &spec : job.callback_specs) json_array_append_new(cbs, json_loads(spec.c_str(), 0, nullptr));
  json_object_set_new(tr, "callbacks", cbs);
  json_t *lg = json_array();
  for (const auto &l : t.logger.list) {
    bool jsonl = dynamic_cast<const JsonLinesLogger *>(l.get()) != nullptr;
    json_array_append_new(lg, json_string(jsonl ? "jsonl" : "csv"));
  }
  json_object_set_new(tr, "logger", t.logger.enabled ? (t.logger.list.empty() ? json_true() : lg) : json_false());
  if (!t.logger.enabled || t.logger.list.empty()) json_decref(lg);
  json_object_set_new(tr, "enable_progress_bar", json_boolean(t.enable_progress_bar));
  json_object_set_new(tr, "enable_checkpointing", json_boolean(t.enable_checkpointing));
  json_object_set_new(root.get(), "trainer", tr);
  json_object_set_new(root.get(), "ckpt_path", json_string(job.ckpt_path.c_str()));
  json_object_set_new(root.get(), "test", json_boolean(job.test));
  return detail::dump(root.get(), JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10)) + "\n";
}

}  // namespace hpu
