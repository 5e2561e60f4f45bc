// The three autocast op lists: Habana's defaults, their replacement from list
// files named by the environment at initialisation, and from code.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>

#include "autocast/autocast.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/runtime.hpp"

namespace hpu::autocast {

namespace {

// Habana bridge 1.19.0, hpu_ops/autocast_helpers.h (the same lists as the docs).
const std::vector<std::string> kLowerPrecision = {
    "addmm", "addbmm", "batch_norm", "baddbmm", "bmm", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "dot", "dropout", "feature_dropout", "group_norm",
    "instance_norm", "layer_norm", "leaky_relu", "linear", "matmul", "mean", "mm", "mul", "mv", "softmax",
    "log_softmax", "scaled_dot_product_attention"};

const std::vector<std::string> kFp32 = {
    "acos", "addcdiv", "asin", "atan2", "bilinear", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "cdist", "cosh", "cosine_embedding_loss", "cosine_similarity", "cross_entropy_loss", "dist", "div",
    "divide", "embedding", "embedding_bag", "erfinv", "exp", "expm1", "hinge_embedding_loss", "huber_loss",
    "kl_div", "l1_loss", "log", "log10", "log1p", "log2", "logsumexp", "margin_ranking_loss", "mse_loss",
    "multi_margin_loss", "multilabel_margin_loss", "nll_loss", "pdist", "poisson_nll_loss", "pow",
    "reciprocal", "renorm", "rsqrt", "sinh", "smooth_l1_loss", "soft_margin_loss", "softplus", "tan", "topk",
    "triplet_margin_loss", "truediv", "true_divide"};

// Hard-coded in Habana's bridge (not read from a file).
const std::vector<std::string> kPromote = {"add", "addcmul", "addcdiv", "cat",  "div",     "exp",
                                           "mul", "pow",     "sub",     "iadd", "truediv", "stack"};

// Ops libhpu implements that no default list names.
const std::vector<std::string> kOtherOps = {"relu", "gelu", "tanh", "sigmoid", "sum"};

struct Table {
  std::set<std::string> lists[3];
};

std::mutex g_mu;                       // guards g_table (the pointer)
std::mutex g_write_mu;                 // serialises replacements (copy, change, publish)
std::shared_ptr<const Table> g_table;  // replaced whole, so readers keep a consistent snapshot

std::shared_ptr<const Table> table() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_table) {
    auto t = std::make_shared<Table>();
    for (int i = 0; i < 3; ++i) {
      const auto &d = default_list(static_cast<hpuAutocastList_t>(i));
      t->lists[i].insert(d.begin(), d.end());
    }
    g_table = std::move(t);
  }
  return g_table;
}

const char *list_name(hpuAutocastList_t which) {
  switch (which) {
    case HPU_AUTOCAST_LOWER_PRECISION: return "lower-precision";
    case HPU_AUTOCAST_FP32: return "fp32";
    case HPU_AUTOCAST_PROMOTE: return "promote";
  }
  return "?";
}

size_t edit_distance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string trim(const std::string &s) {
  const char *ws = " \t\r\n\v\f";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

void init_autocast(const Config &c) {
  reset_lists();
  load_list_overrides(c);
}

const bool registered = (on_init(20, init_autocast), true);

}  // namespace

const std::vector<std::string> &default_list(hpuAutocastList_t which) {
  switch (which) {
    case HPU_AUTOCAST_LOWER_PRECISION: return kLowerPrecision;
    case HPU_AUTOCAST_FP32: return kFp32;
    case HPU_AUTOCAST_PROMOTE: break;
  }
  return kPromote;
}

const std::vector<std::string> &known_ops() {
  static const std::vector<std::string> known = [] {
    std::set<std::string> all;
    for (const auto *l : {&kLowerPrecision, &kFp32, &kPromote, &kOtherOps}) all.insert(l->begin(), l->end());
    return std::vector<std::string>(all.begin(), all.end());
  }();
  return known;
}

std::string nearest_known(const std::string &name) {
  // A name that contains a known one, or is contained in it (cross_entropy in
  // cross_entropy_loss), beats one that is merely a few edits away.
  std::string best;
  size_t best_score = SIZE_MAX;
  for (const std::string &k : known_ops()) {
    bool related = std::min(name.size(), k.size()) >= 3 &&
                   (k.find(name) != std::string::npos || name.find(k) != std::string::npos);
    size_t score = edit_distance(name, k) + (related ? 0 : 1000);
    if (score < best_score) best_score = score, best = k;
  }
  return best;
}

void set_list(hpuAutocastList_t which, std::vector<std::string> names, const char *source) {
  const auto &known = known_ops();
  for (const std::string &n : names)
    if (!std::binary_search(known.begin(), known.end(), n))
      HPU_LOG(warn, "autocast", "%s: unknown op \"%s\" in the %s list (did you mean \"%s\"?)", source, n.c_str(),
              list_name(which), nearest_known(n).c_str());
  std::lock_guard<std::mutex> write(g_write_mu);
  auto t = std::make_shared<Table>(*table());
  t->lists[which] = std::set<std::string>(names.begin(), names.end());
  HPU_LOG(info, "autocast", "%s list set from %s: %zu ops", list_name(which), source, t->lists[which].size());
  std::lock_guard<std::mutex> lock(g_mu);
  g_table = std::move(t);
}

std::vector<std::string> get_list(hpuAutocastList_t which) {
  auto t = table();
  return std::vector<std::string>(t->lists[which].begin(), t->lists[which].end());
}

void reset_lists() {
  std::lock_guard<std::mutex> write(g_write_mu);
  std::lock_guard<std::mutex> lock(g_mu);
  g_table.reset();
}

Policy policy_of(const char *op) {
  auto t = table();
  std::string name(op);
  if (t->lists[HPU_AUTOCAST_LOWER_PRECISION].count(name)) return Policy::lower_precision;
  if (t->lists[HPU_AUTOCAST_FP32].count(name)) return Policy::fp32;
  if (t->lists[HPU_AUTOCAST_PROMOTE].count(name)) return Policy::promote;
  return Policy::none;
}

std::vector<std::string> read_list_file(const char *variable, const char *path) {
  FILE *f = std::fopen(path, "r");
  if (!f)
    fail(HPU_ERROR_CONFIG, "%s=\"%s\": cannot open the autocast op list: %s", variable, path, std::strerror(errno));
  std::vector<std::string> names;
  char *line = nullptr;
  size_t cap = 0;
  errno = 0;
  while (getline(&line, &cap, f) >= 0) {
    std::string s(line);
    size_t hash = s.find('#');
    if (hash != std::string::npos) s.erase(hash);
    s = trim(s);
    if (!s.empty()) names.push_back(std::move(s));
  }
  int err = std::ferror(f) ? errno : 0;
  std::free(line);
  std::fclose(f);
  if (err)
    fail(HPU_ERROR_CONFIG, "%s=\"%s\": cannot read the autocast op list: %s", variable, path, std::strerror(err));
  return names;
}

void load_list_overrides(const Config &c) {
  struct Override {
    hpuAutocastList_t which;
    const OpListFile &file;
  };
  const Override overrides[] = {{HPU_AUTOCAST_LOWER_PRECISION, c.lower_precision_ops}, {HPU_AUTOCAST_FP32, c.fp32_ops}};
  // Read both files before changing anything, so a bad one leaves the defaults.
  std::vector<std::string> lists[2];
  std::string sources[2];
  for (int i = 0; i < 2; ++i) {
    const OpListFile &f = overrides[i].file;
    if (f.path.empty()) continue;
    lists[i] = read_list_file(f.source.c_str(), f.path.c_str());
    sources[i] = strf("%s=\"%s\"", f.source.c_str(), f.path.c_str());
  }
  for (int i = 0; i < 2; ++i)
    if (!sources[i].empty()) set_list(overrides[i].which, std::move(lists[i]), sources[i].c_str());
}

}  // namespace hpu::autocast
