// hpu-train job documents: jansson for values, job_locator for lines.
#include <hpu/trainer/callbacks.hpp>
#include <hpu/trainer/job.hpp>

#include "error.hpp"
#include "fs.hpp"
#include "job_locator.hpp"
#include "json.hpp"
#include "option_fields.hpp"

#include <climits>
#include <cmath>
#include <functional>
#include <memory>
#include <type_traits>
#include <variant>

namespace hpu {

using detail::fail;
using detail::format;

using Ctx = detail::JsonCtx;
using Obj = detail::JsonObj;
using detail::type_name;

namespace {

BatchCount batch_count(const Ctx &c, json_t *v, const std::string &path) {
  if (json_is_integer(v)) return BatchCount(int64_t(json_integer_value(v)));
  if (json_is_real(v)) return BatchCount(json_real_value(v));
  c.error(path, std::string("expected a number of batches (integer) or a fraction (number), found ") + type_name(v));
}

// Reads a list of layers (model.layers, or a residual block's "layers") at
// `path`: each layer's own keys. check_layers relates them to each other.
std::vector<LayerSpec> read_layer_list(const Ctx &c, json_t *arr, const std::string &path, bool in_residual) {
  if (!json_is_array(arr) || json_array_size(arr) == 0) c.error(path, "expected a non-empty array of layers");
  std::vector<LayerSpec> layers;
  for (size_t i = 0; i < json_array_size(arr); ++i) {
    const std::string lpath = format("%s[%zu]", path.c_str(), i);
    Obj o(c, json_array_get(arr, i), lpath);
    LayerSpec l;
    o.string("type", l.type,
             {"linear", "relu", "gelu", "tanh", "dropout", "layernorm", "embedding", "flatten", "residual"});
    if (l.type.empty()) c.error(lpath, "missing key \"type\"");
    if (in_residual && (l.type == "flatten" || l.type == "embedding"))
      c.error(o.key("type"), "\"" + l.type + "\" cannot be inside a residual block: x + layers(x) needs layers that keep x's shape");
    if (l.type == "linear") {
      o.integer("in_features", l.in_features, 1, INT32_MAX);
      o.integer("out_features", l.out_features, 1, INT32_MAX);
      o.boolean("bias", l.bias);
      if (!l.in_features) c.error(lpath, "missing key \"in_features\"");
      if (!l.out_features) c.error(lpath, "missing key \"out_features\"");
    } else if (l.type == "dropout") {
      o.number("p", l.p, 0.0, 0.999999);
    } else if (l.type == "layernorm") {
      o.integer("normalized_shape", l.normalized_shape, 1, INT32_MAX);
      o.number("eps", l.eps, 1e-30, 1.0);
    } else if (l.type == "embedding") {
      o.integer("num_embeddings", l.num_embeddings, 1, INT32_MAX);
      o.integer("embedding_dim", l.embedding_dim, 1, INT32_MAX);
      if (!l.num_embeddings || !l.embedding_dim) c.error(lpath, "needs \"num_embeddings\" and \"embedding_dim\"");
    } else if (l.type == "residual") {
      json_t *inner = o.get("layers");
      if (!inner) c.error(lpath, "missing key \"layers\" (the block's layers: x + layers(x))");
      l.layers = read_layer_list(c, inner, o.key("layers"), true);
    }
    o.finish();
    layers.push_back(std::move(l));
  }
  return layers;
}

// What flows between layers, as far as the data tells: the last dimension of
// a sample (0: not known), the values a sample holds when flattened, whether
// samples are flat (rank 1), and who gives them (for messages).
struct Flow {
  int64_t width = 0, flat_width = 0;
  enum { unknown, flat, nested } rank = unknown;
  std::string from = "the data's samples have";
};

using Complain = std::function<void(const std::string &path, const std::string &problem)>;

// The width a block's input must have, from its first layer that names one.
int64_t input_width(const std::vector<LayerSpec> &layers) {
  for (const LayerSpec &l : layers) {
    if (l.type == "linear") return l.in_features;
    if (l.type == "layernorm" && l.normalized_shape) return l.normalized_shape;
    if (l.type == "residual") return input_width(l.layers);
    if (l.type == "embedding" || l.type == "flatten") return 0;
  }
  return 0;
}

// Follows the widths through `layers`; `complain` throws.
void walk_layers(std::vector<LayerSpec> &layers, const std::string &path, Flow &f, const Complain &complain) {
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerSpec &l = layers[i];
    const std::string lpath = format("%s[%zu]", path.c_str(), i);
    auto mismatch = [&](const char *key, int64_t v) {
      complain(lpath + "." + key,
               format("%lld, but %s %lld features", (long long)v, f.from.c_str(), (long long)f.width));
    };
    if (l.type == "linear") {
      if (f.rank == Flow::nested)
        complain(lpath, "a linear layer on unflattened samples; put a \"flatten\" layer first");
      if (f.width && l.in_features != f.width) mismatch("in_features", l.in_features);
      f.width = f.flat_width = l.out_features;
    } else if (l.type == "layernorm") {
      if (!l.normalized_shape && !f.width)
        complain(lpath, "missing key \"normalized_shape\" (the width before it is not known)");
      if (!l.normalized_shape) l.normalized_shape = f.width;
      if (f.width && l.normalized_shape != f.width) mismatch("normalized_shape", l.normalized_shape);
      f.width = l.normalized_shape;
    } else if (l.type == "embedding") {
      f.width = l.embedding_dim;
      f.flat_width = 0;
      f.rank = Flow::nested;
    } else if (l.type == "flatten") {
      f.width = f.flat_width;
      f.rank = Flow::flat;
    } else if (l.type == "residual") {
      Flow in = f;
      if (!in.width) in.width = in.flat_width = input_width(l.layers);
      Flow body = in;
      walk_layers(l.layers, lpath + ".layers", body, complain);
      if (in.width && body.width && body.width != in.width)
        complain(lpath, format("the residual block's layers end with %lld features, but its input has %lld; "
                               "x + layers(x) needs layers that keep the width",
                               (long long)body.width, (long long)in.width));
      f = in;
    } else {
      continue;  // elementwise: the width passes through
    }
    f.from = "the previous layer gives";
  }
}

std::string num_classes_text(int classes) {
  return format("the data has %d classes (data.num_classes), so cross-entropy needs %d class scores", classes, classes);
}

// check_layers, with `complain` (which throws) reporting each problem.
void check_model(std::vector<LayerSpec> &layers, const std::vector<int64_t> &sample_shape, int num_classes,
                 const std::string &classes, const Complain &complain) {
  Flow f;
  if (!sample_shape.empty()) {
    f.width = sample_shape.back();
    f.flat_width = 1;
    for (int64_t d : sample_shape) f.flat_width *= d;
    f.rank = sample_shape.size() == 1 ? Flow::flat : Flow::nested;
  }
  walk_layers(layers, "model.layers", f, complain);
  const std::string last = format("model.layers[%zu]", layers.size() - 1);
  // Samples still of several dimensions (no flatten yet) have no class
  // scores to count; the loss reports their shape when the model runs.
  if (num_classes && f.width && f.rank != Flow::nested && f.width != num_classes)
    complain(last, format("the model ends with %lld features; %s", (long long)f.width, classes.c_str()));
}


std::vector<LayerSpec> read_layers(const Ctx &c, json_t *model, const DataSpec &data) {
  Obj m(c, model, "model");
  json_t *arr = m.get("layers");
  if (!arr) c.error("model", "missing key \"layers\"");
  std::vector<LayerSpec> layers = read_layer_list(c, arr, "model.layers", false);
  const bool fashion = data.name == "fashion_mnist";
  const int classes = fashion ? 10 : data.files.num_classes;
  check_model(layers, fashion ? std::vector<int64_t>{28, 28} : std::vector<int64_t>{}, classes,
                       fashion ? "Fashion-MNIST's cross-entropy needs 10 class scores" : num_classes_text(classes),
                       [&](const std::string &path, const std::string &problem) { c.error(path, problem); });
  m.finish();
  return layers;
}

OptimizerSpec read_optimizer(const Ctx &c, json_t *o) {
  OptimizerSpec s;
  Obj r(c, o, "optimizer");
  r.string("name", s.name, {"sgd", "adamw"});
  r.number("lr", s.lr, 0.0, 1e6);
  r.number("momentum", s.momentum, 0.0, 1.0);
  r.boolean("nesterov", s.nesterov);
  r.number("weight_decay", s.weight_decay, 0.0, 1e6);
  r.number("beta1", s.beta1, 0.0, 0.999999);
  r.number("beta2", s.beta2, 0.0, 0.999999999);
  r.number("eps", s.eps, 1e-30, 1.0);
  if (json_t *a = r.get("no_weight_decay")) {
    if (!json_is_array(a))
      c.error("optimizer.no_weight_decay",
              std::string("expected an array of names (\"bias\", \"norm\"), found ") + type_name(a));
    for (size_t i = 0; i < json_array_size(a); ++i) {
      const char *e = json_string_value(json_array_get(a, i));
      if (!e || !*e)
        c.error(format("optimizer.no_weight_decay[%zu]", i),
                std::string("expected a non-empty string, found ") + type_name(json_array_get(a, i)));
      s.no_weight_decay.push_back(e);
    }
  }
  if (s.nesterov && s.momentum == 0.0) c.error("optimizer.nesterov", "nesterov needs a momentum > 0");
  r.finish();
  return s;
}

SchedulerSpec read_scheduler(const Ctx &c, json_t *o, const OptimizerSpec &opt) {
  SchedulerSpec s;
  Obj r(c, o, "scheduler");
  r.string("name", s.name, {"none", "step", "cosine", "plateau"});
  r.integer("step_size", s.step_size, 1, INT64_MAX);
  r.number("gamma", s.gamma, 1e-30, 1e6);
  r.integer("warmup_steps", s.warmup_steps, 0, INT64_MAX);
  r.integer("total_steps", s.total_steps, 0, INT64_MAX);
  r.number("min_lr", s.min_lr, 0.0, 1e6);
  r.string("interval", s.interval, {"step", "epoch"});
  r.string("monitor", s.monitor);
  r.string("mode", s.mode, {"min", "max"});
  r.number("factor", s.factor, 1e-30, 0.999999);
  r.integer("patience", s.patience, 0, INT32_MAX);
  r.number("threshold", s.threshold, 0.0, 1e300);
  r.string("threshold_mode", s.threshold_mode, {"rel", "abs"});
  r.integer("cooldown", s.cooldown, 0, INT32_MAX);
  if (s.name == "plateau" && s.monitor.empty()) c.error("scheduler.monitor", "empty; name a logged metric (\"val_loss\")");
  if (s.name == "plateau" && s.interval == "step")
    c.error("scheduler.interval", "\"step\"; plateau steps once per epoch, on its monitor's value");
  if (s.name == "cosine" && s.total_steps && s.total_steps <= s.warmup_steps)
    c.error("scheduler.total_steps", format("%lld; expected more than warmup_steps (%lld)", (long long)s.total_steps,
                                            (long long)s.warmup_steps));
  if (s.min_lr > opt.lr) c.error("scheduler.min_lr", format("%g exceeds optimizer.lr %g", s.min_lr, opt.lr));
  r.finish();
  return s;
}

// The callbacks a job may name, by "type", each built from its object's
// other members (hpu-train(1) lists them; a test checks the list).
struct CallbackType {
  const char *type;
  Ref<Callback> (*build)(Obj &o, json_t *v);
};

const CallbackType kCallbackTypes[] = {
    {"DeviceStatsMonitor", [](Obj &, json_t *) -> Ref<Callback> { return DeviceStatsMonitor{}; }},
    {"ModelCheckpoint",
     [](Obj &o, json_t *) -> Ref<Callback> {
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
     }},
    {"EarlyStopping",
     [](Obj &o, json_t *v) -> Ref<Callback> {
       EarlyStoppingOptions e;
       o.string("monitor", e.monitor);
       o.number("min_delta", e.min_delta, -1e300, 1e300);
       o.integer("patience", e.patience, 0, INT32_MAX);
       o.string("mode", e.mode, {"min", "max"});
       o.boolean("strict", e.strict);
       o.boolean("check_finite", e.check_finite);
       o.boolean("check_on_train_epoch_end", e.check_on_train_epoch_end);
       double t = 0;
       if (json_object_get(v, "stopping_threshold"))
         o.number("stopping_threshold", t, -1e300, 1e300), e.stopping_threshold = t;
       if (json_object_get(v, "divergence_threshold"))
         o.number("divergence_threshold", t, -1e300, 1e300), e.divergence_threshold = t;
       return EarlyStopping(e);
     }},
    {"LearningRateMonitor",
     [](Obj &o, json_t *) -> Ref<Callback> {
       std::string interval;
       bool momentum = false;
       o.string("logging_interval", interval, {"step", "epoch"});
       o.boolean("log_momentum", momentum);
       return LearningRateMonitor(interval, momentum);
     }},
    {"ProgressBar",
     [](Obj &o, json_t *) -> Ref<Callback> {
       int refresh = 0;
       o.integer("refresh_rate", refresh, 0, INT32_MAX);
       return ProgressBar(refresh);
     }},
};

Ref<Callback> build_callback(const Ctx &c, Obj &o, json_t *v, const std::string &path) {
  std::string type;
  o.string("type", type);
  if (type.empty()) c.error(path, "missing key \"type\"");
  std::string known;
  for (const CallbackType &t : kCallbackTypes) {
    if (type != t.type) {
      known += std::string(known.empty() ? "" : ", ") + "\"" + t.type + "\"";
      continue;
    }
    try {
      return t.build(o, v);
    } catch (const Error &e) {
      if (e.status() == HPU_ERROR_CONFIG) throw;
      c.error(path, e.what());
    }
  }
  c.error(o.key("type"), "\"" + type + "\" is not one of " + known);
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

// One option of the table (option_fields.cpp) from its member of "trainer":
// the JSON type here, the range in resolve_options (called below).
void read_option(const Ctx &c, Obj &r, const detail::OptionField &f, TrainerOptions &o) {
  json_t *v = r.get(f.key);
  if (!v) return;
  const std::string path = r.key(f.key);
  auto want = [&](bool ok, const char *what) {
    if (!ok) c.error(path, std::string("expected ") + what + ", found " + type_name(v));
  };
  // An integer within the member's type; its range is the table's.
  auto integer = [&](long double lo, long double hi) {
    want(json_is_integer(v), "an integer");
    long long x = json_integer_value(v);
    if (x < lo || x > hi) c.error(path, format("%lld is out of range [%.0Lf, %.0Lf]", x, lo, hi));
    return x;
  };
  std::visit(
      [&](auto m) {
        using M = decltype(m);
        if constexpr (std::is_same_v<M, std::string TrainerOptions::*>) {
          want(json_is_string(v), "a string");
          o.*m = json_string_value(v);
        } else if constexpr (std::is_same_v<M, Devices TrainerOptions::*>) {
          if (json_is_integer(v)) o.*m = Devices(int(integer(INT32_MIN, INT32_MAX)));
          else if (json_is_string(v)) o.*m = Devices(std::string(json_string_value(v)));
          else want(false, "an integer or \"auto\"");
        } else if constexpr (std::is_same_v<M, int TrainerOptions::*>) {
          o.*m = int(integer(INT32_MIN, INT32_MAX));
        } else if constexpr (std::is_same_v<M, int64_t TrainerOptions::*>) {
          o.*m = integer(INT64_MIN, INT64_MAX);
        } else if constexpr (std::is_same_v<M, std::optional<int64_t> TrainerOptions::*>) {
          if (json_is_null(v)) o.*m = std::nullopt;
          else o.*m = integer(INT64_MIN, INT64_MAX);
        } else if constexpr (std::is_same_v<M, std::optional<uint64_t> TrainerOptions::*>) {
          if (json_is_null(v)) o.*m = std::nullopt;
          else o.*m = uint64_t(integer(0, INT64_MAX));
        } else if constexpr (std::is_same_v<M, BatchCount TrainerOptions::*>) {
          o.*m = batch_count(c, v, path);
        } else if constexpr (std::is_same_v<M, double TrainerOptions::*>) {
          want(json_is_number(v), "a number");
          o.*m = json_number_value(v);
        } else if constexpr (std::is_same_v<M, bool TrainerOptions::*>) {
          want(json_is_boolean(v), "true or false");
          o.*m = json_is_true(v);
        } else if constexpr (std::is_same_v<M, MaxTime TrainerOptions::*>) {
          want(json_is_string(v) || json_is_number(v) || json_is_null(v),
               "\"DD:HH:MM:SS\", a number of seconds or null");
          o.*m = json_is_string(v) ? MaxTime(json_string_value(v)) : MaxTime();
          if (json_is_number(v)) (o.*m).seconds = json_number_value(v);
        } else if constexpr (std::is_same_v<M, FastDevRun TrainerOptions::*>) {
          want(json_is_boolean(v) || json_is_integer(v), "true, false or a number of batches");
          o.*m = json_is_boolean(v) ? FastDevRun(json_is_true(v)) : FastDevRun(int64_t(json_integer_value(v)));
        }
      },
      f.member);
}

json_t *option_json(const detail::OptionField &f, const TrainerOptions &o) {
  return std::visit(
      [&](auto m) -> json_t * {
        using M = decltype(m);
        if constexpr (std::is_same_v<M, std::monostate>) {
          return nullptr;
        } else if constexpr (std::is_same_v<M, std::string TrainerOptions::*>) {
          return json_string((o.*m).c_str());
        } else if constexpr (std::is_same_v<M, Devices TrainerOptions::*>) {
          const Devices &d = o.*m;
          return d.text.empty() ? json_integer(d.count) : json_string(d.text.c_str());
        } else if constexpr (std::is_same_v<M, std::optional<int64_t> TrainerOptions::*> ||
                             std::is_same_v<M, std::optional<uint64_t> TrainerOptions::*>) {
          return o.*m ? json_integer(json_int_t(*(o.*m))) : json_null();
        } else if constexpr (std::is_same_v<M, BatchCount TrainerOptions::*>) {
          const BatchCount &b = o.*m;
          return b.fraction ? json_real(*b.fraction) : json_integer(json_int_t(b.batches));
        } else if constexpr (std::is_same_v<M, double TrainerOptions::*>) {
          return json_real(o.*m);
        } else if constexpr (std::is_same_v<M, bool TrainerOptions::*>) {
          return json_boolean(o.*m);
        } else if constexpr (std::is_same_v<M, MaxTime TrainerOptions::*>) {
          const MaxTime &t = o.*m;
          return !t.text.empty() ? json_string(t.text.c_str()) : t.seconds ? json_real(*t.seconds) : json_null();
        } else if constexpr (std::is_same_v<M, FastDevRun TrainerOptions::*>) {
          const FastDevRun &f = o.*m;
          return f.flag ? json_boolean(f.batches > 0) : json_integer(json_int_t(f.batches));
        } else {
          return json_integer(json_int_t(o.*m));
        }
      },
      f.member);
}

TrainerOptions read_trainer(const Ctx &c, json_t *t, std::vector<std::string> &specs) {
  TrainerOptions o;
  Obj r(c, t, "trainer");
  for (const detail::OptionField &f : detail::trainer_option_fields()) read_option(c, r, f, o);
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
  // More devices than are visible is out of range for this machine, not a bad
  // job: HPU_ERROR_INVALID_ARGUMENT as when the trainer starts, named where the
  // count was given.
  try {
    resolve_devices(o.devices, device_count());
  } catch (const Error &e) {
    fail(e.status(), "%s: %s", c.where("trainer.devices").c_str(), e.what());
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

// The data section; the keys of idx and npy data only with those.
DataSpec read_data(const Ctx &c, json_t *d) {
  DataSpec s;
  Obj o(c, d, "data");
  o.string("name", s.name, {"fashion_mnist", "idx", "npy"});
  const bool files = s.name != "fashion_mnist";
  if (files) s.root.clear(), s.val_size = 0;
  o.string("root", s.root);
  o.integer("batch_size", s.batch_size, 1, INT32_MAX);
  o.integer("val_size", s.val_size, 0, files ? INT64_MAX : 59999);
  FileDataOptions &f = s.files;
  f.format = s.name;
  const std::pair<const char *, std::string *> paths[] = {
      {"train_features", &f.train_features}, {"train_labels", &f.train_labels}, {"val_features", &f.val_features},
      {"val_labels", &f.val_labels},         {"test_features", &f.test_features}, {"test_labels", &f.test_labels}};
  const char *const file_keys[] = {"train_features", "train_labels", "val_features", "val_labels", "test_features",
                                   "test_labels", "normalize", "flatten", "num_classes"};
  for (const char *k : file_keys)
    if (!files && json_object_get(d, k)) c.error(o.key(k), "only for \"idx\" and \"npy\" data (data.name)");
  for (const auto &[k, out] : paths) o.string(k, *out);
  if (json_t *n = o.get("normalize")) {
    Obj r(c, n, "data.normalize");
    r.number("scale", f.normalize.scale, -1e30, 1e30);
    r.number("mean", f.normalize.mean, -1e30, 1e30);
    r.number("std", f.normalize.std, 1e-30, 1e30);
    r.finish();
  }
  o.boolean("flatten", f.flatten);
  o.integer("num_classes", f.num_classes, 0, INT32_MAX);
  if (files) {
    for (const char *k : {"train_features", "train_labels"})
      if (!json_object_get(d, k)) c.error("data", format("missing key \"%s\" (%s data)", k, s.name.c_str()));
    for (const char *split : {"val", "test"}) {
      const std::string fk = std::string(split) + "_features", lk = std::string(split) + "_labels";
      if (!json_object_get(d, fk.c_str()) != !json_object_get(d, lk.c_str()))
        c.error(o.key(json_object_get(d, fk.c_str()) ? fk : lk),
                format("%s and %s go together; give both or neither", fk.c_str(), lk.c_str()));
    }
    if (!f.val_features.empty() && s.val_size)
      c.error(o.key("val_size"), format("%lld beside val_features; the validation set comes from one or the other",
                                        (long long)s.val_size));
  }
  f.val_size = size_t(s.val_size);
  o.finish();
  return s;
}

json_t *layers_json(const std::vector<LayerSpec> &layers) {
  json_t *out = json_array();
  for (const auto &l : layers) {
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string(l.type.c_str()));
    if (l.type == "linear") {
      json_object_set_new(o, "in_features", json_integer(l.in_features));
      json_object_set_new(o, "out_features", json_integer(l.out_features));
      json_object_set_new(o, "bias", json_boolean(l.bias));
    } else if (l.type == "dropout") {
      json_object_set_new(o, "p", json_real(l.p));
    } else if (l.type == "layernorm") {
      if (l.normalized_shape) json_object_set_new(o, "normalized_shape", json_integer(l.normalized_shape));
      json_object_set_new(o, "eps", json_real(l.eps));
    } else if (l.type == "embedding") {
      json_object_set_new(o, "num_embeddings", json_integer(l.num_embeddings));
      json_object_set_new(o, "embedding_dim", json_integer(l.embedding_dim));
    } else if (l.type == "residual") {
      json_object_set_new(o, "layers", layers_json(l.layers));
    }
    json_array_append_new(out, o);
  }
  return out;
}

}  // namespace

void check_layers(std::vector<LayerSpec> &layers, const std::vector<int64_t> &sample_shape, int num_classes,
                  const std::string &classes) {
  check_model(layers, sample_shape, num_classes, classes, [](const std::string &path, const std::string &problem) {
    fail(HPU_ERROR_CONFIG, "%s: %s", path.c_str(), problem.c_str());
  });
}

Job parse_job(const std::string &text, const std::string &source, const std::vector<Override> &overrides) {
  detail::Json root = detail::parse_document(text, source);
  Ctx c{source, detail::json_key_lines(text), {}};
  if (!json_is_object(root.get())) c.error("(document)", std::string("expected an object, found ") + type_name(root.get()));
  for (const auto &ov : overrides) {
    apply_override(root.get(), ov);
    c.flags[ov.key] = ov.flag;
  }

  Job job;
  Obj top(c, root.get(), "");
  if (json_t *d = top.get("data")) job.data = read_data(c, d);
  json_t *model = top.get("model");
  if (!model) c.error("(document)", "missing key \"model\"");
  job.layers = read_layers(c, model, job.data);
  if (json_t *o = top.get("optimizer")) job.optimizer = read_optimizer(c, o);
  if (json_t *o = top.get("scheduler")) job.scheduler = read_scheduler(c, o, job.optimizer);
  if (json_t *t = top.get("trainer")) job.trainer = read_trainer(c, t, job.callback_specs);
  top.string("command", job.command, {"fit", "validate", "test", "predict"});
  top.string("ckpt_path", job.ckpt_path);
  top.boolean("test", job.test);
  top.string("test_ckpt_path", job.test_ckpt_path);
  if (json_t *p = top.get("predict")) {
    Obj o(c, p, "predict");
    o.string("output", job.predict_output);
    if (job.predict_output.empty()) c.error("predict.output", "expected the path of the predictions file");
    o.finish();
  }
  // Without a fit, "best" and "last" (this run's checkpoints) name nothing.
  if (job.command != "fit" && (job.ckpt_path.empty() || job.ckpt_path == "best" || job.ckpt_path == "last"))
    c.error(json_object_get(root.get(), "ckpt_path") ? "ckpt_path" : "(document)",
            format("the \"%s\" command needs ckpt_path: the path of the checkpoint whose weights it uses%s",
                   job.command.c_str(), job.ckpt_path.empty() ? "" : " (\"best\" and \"last\" refer to a fit)"));
  top.finish();
  return job;
}

std::string model_spec_to_json(const ModelSpec &spec) {
  Job job;
  job.layers = spec.layers;
  job.optimizer = spec.optimizer;
  job.scheduler = spec.scheduler;
  detail::Json all = detail::parse_object(job_to_json(job), "job", HPU_ERROR_INTERNAL);
  detail::Json out(json_object());
  for (const char *k : {"model", "optimizer", "scheduler"})
    if (std::string(k) != "model" || !spec.layers.empty())
      json_object_set(out.get(), k, json_object_get(all.get(), k));
  return detail::dump(out.get(), JSON_COMPACT | JSON_PRESERVE_ORDER);
}

ModelSpec parse_model_spec(const std::string &text, const std::string &source) {
  json_error_t err;
  detail::Json root(json_loadb(text.data(), text.size(), 0, &err));
  if (!root) fail(HPU_ERROR_CONFIG, "%s:%d: JSON syntax error: %s", source.c_str(), err.line, err.text);
  Ctx c{source, detail::json_key_lines(text), {}};
  if (!json_is_object(root.get())) c.error("(document)", std::string("expected an object, found ") + type_name(root.get()));
  ModelSpec spec;
  Obj top(c, root.get(), "");
  DataSpec no_data;
  no_data.name.clear();  // no data set's shape to check the layers against
  if (json_t *m = top.get("model")) spec.layers = read_layers(c, m, no_data);
  if (json_t *o = top.get("optimizer")) spec.optimizer = read_optimizer(c, o);
  if (json_t *o = top.get("scheduler")) spec.scheduler = read_scheduler(c, o, spec.optimizer);
  top.finish();
  return spec;
}

Job load_job(const std::string &path, const std::vector<Override> &overrides) {
  return parse_job(detail::read_file(path), path, overrides);
}

std::unique_ptr<DataModule> make_data(const DataSpec &spec) {
  if (spec.name == "fashion_mnist")
    return std::make_unique<FashionMNIST>(spec.batch_size, spec.root, size_t(spec.val_size));
  FileDataOptions o = spec.files;
  o.format = spec.name;
  o.val_size = size_t(spec.val_size);
  // Relative names are under root when it is set.
  for (std::string *p : {&o.train_features, &o.train_labels, &o.val_features, &o.val_labels, &o.test_features,
                         &o.test_labels})
    if (!spec.root.empty() && !p->empty() && (*p)[0] != '/') *p = spec.root + "/" + *p;
  return std::make_unique<FileData>(std::move(o), spec.batch_size);
}

std::string job_to_json(const Job &job) {
  detail::Json root(json_object());
  json_t *model = json_object();
  json_object_set_new(model, "layers", layers_json(job.layers));
  json_object_set_new(root.get(), "model", model);

  const DataSpec &ds = job.data;
  json_t *data = json_object();
  json_object_set_new(data, "name", json_string(ds.name.c_str()));
  json_object_set_new(data, "root", json_string(ds.root.c_str()));
  json_object_set_new(data, "batch_size", json_integer(ds.batch_size));
  json_object_set_new(data, "val_size", json_integer(ds.val_size));
  if (ds.name != "fashion_mnist") {
    const FileDataOptions &f = ds.files;
    for (const auto &[k, v] : {std::pair<const char *, const std::string &>{"train_features", f.train_features},
                               {"train_labels", f.train_labels}, {"val_features", f.val_features},
                               {"val_labels", f.val_labels}, {"test_features", f.test_features},
                               {"test_labels", f.test_labels}})
      if (!v.empty()) json_object_set_new(data, k, json_string(v.c_str()));
    json_t *n = json_object();
    json_object_set_new(n, "scale", json_real(f.normalize.scale));
    json_object_set_new(n, "mean", json_real(f.normalize.mean));
    json_object_set_new(n, "std", json_real(f.normalize.std));
    json_object_set_new(data, "normalize", n);
    json_object_set_new(data, "flatten", json_boolean(f.flatten));
    json_object_set_new(data, "num_classes", json_integer(f.num_classes));
  }
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
  json_t *nwd = json_array();
  for (const std::string &e : os.no_weight_decay) json_array_append_new(nwd, json_string(e.c_str()));
  json_object_set_new(opt, "no_weight_decay", nwd);
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
  } else if (ss.name == "plateau") {
    json_object_set_new(sch, "monitor", json_string(ss.monitor.c_str()));
    json_object_set_new(sch, "mode", json_string(ss.mode.c_str()));
    json_object_set_new(sch, "factor", json_real(ss.factor));
    json_object_set_new(sch, "patience", json_integer(ss.patience));
    json_object_set_new(sch, "threshold", json_real(ss.threshold));
    json_object_set_new(sch, "threshold_mode", json_string(ss.threshold_mode.c_str()));
    json_object_set_new(sch, "cooldown", json_integer(ss.cooldown));
    json_object_set_new(sch, "min_lr", json_real(ss.min_lr));
  }
  if (!ss.interval.empty()) json_object_set_new(sch, "interval", json_string(ss.interval.c_str()));
  json_object_set_new(root.get(), "scheduler", sch);

  const TrainerOptions &t = job.trainer;
  json_t *tr = json_object();
  for (const detail::OptionField &f : detail::trainer_option_fields()) {
    json_t *v = option_json(f, t);
    if (!v && std::string(f.key) == "callbacks") {
      v = json_array();
      for (const auto &spec : job.callback_specs) json_array_append_new(v, json_loads(spec.c_str(), 0, nullptr));
    } else if (!v) {  // logger
      json_t *lg = json_array();
      for (const auto &l : t.logger.list) {
        bool jsonl = dynamic_cast<const JsonLinesLogger *>(l.get()) != nullptr;
        json_array_append_new(lg, json_string(jsonl ? "jsonl" : "csv"));
      }
      v = t.logger.enabled ? (t.logger.list.empty() ? json_true() : lg) : json_false();
      if (v != lg) json_decref(lg);
    }
    json_object_set_new(tr, f.key, v);
  }
  json_object_set_new(root.get(), "trainer", tr);
  json_object_set_new(root.get(), "command", json_string(job.command.c_str()));
  json_object_set_new(root.get(), "ckpt_path", json_string(job.ckpt_path.c_str()));
  json_object_set_new(root.get(), "test", json_boolean(job.test));
  json_object_set_new(root.get(), "test_ckpt_path", json_string(job.test_ckpt_path.c_str()));
  json_t *pred = json_object();
  json_object_set_new(pred, "output", json_string(job.predict_output.c_str()));
  json_object_set_new(root.get(), "predict", pred);
  return detail::dump(root.get(), JSON_INDENT(2) | JSON_PRESERVE_ORDER) + "\n";
}

}  // namespace hpu
