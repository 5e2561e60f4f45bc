// model_summary (module.hpp): Lightning's ModelSummary table, over the Module
// interface only (name(), parameters(), children()), so that any layer shows.
#include <hpu/trainer/module.hpp>

#include "error.hpp"
#include "param_names.hpp"

#include <algorithm>

namespace hpu {

namespace {

int64_t count_params(Module &m) {
  std::vector<Parameter *> ps;
  m.parameters(ps, "");
  int64_t n = 0;
  for (Parameter *p : ps) n += p->value.numel();
  return n;
}

// Lightning's get_human_readable_count: 544, 26.9 K, 1.2 M, ...
std::string readable(int64_t n) {
  static const char *units[] = {"", " K", " M", " B", " T"};
  double v = double(n);
  int u = 0;
  while (v >= 1000 && u < 4) v /= 1000, ++u;
  return u == 0 ? std::to_string(n) : detail::format("%.1f%s", v, units[u]);
}

struct Row {
  std::string name, type, params;
};

void add_rows(std::vector<Row> &rows, const std::string &name, Module &m, int depth, int max_depth) {
  rows.push_back({name, m.name(), readable(count_params(m))});
  if (depth >= max_depth) return;
  std::vector<Module *> children = m.children();
  for (size_t i = 0; i < children.size(); ++i)
    add_rows(rows, name + "." + std::to_string(i), *children[i], depth + 1, max_depth);
}

}  // namespace

std::string model_summary(LightningModule &model, int max_depth) {
  const std::vector<Parameter *> all = model.parameters();
  int64_t total = 0;
  for (Parameter *p : all) total += p->value.numel();
  std::vector<Row> rows;
  {
    detail::KeepNames keep(all);
    for (auto &[name, m] : model.named_modules())
      if (m) add_rows(rows, name, *m, 1, max_depth);
  }

  Row head{"Name", "Type", "Params"};
  size_t wi = std::to_string(rows.size()).size(), wn = head.name.size(), wt = head.type.size(),
         wp = head.params.size();
  for (const Row &r : rows) {
    wn = std::max(wn, r.name.size());
    wt = std::max(wt, r.type.size());
    wp = std::max(wp, r.params.size());
  }
  auto line = [&](const std::string &index, const Row &r) {
    return detail::format("%-*s | %-*s | %-*s | %*s\n", int(wi), index.c_str(), int(wn), r.name.c_str(), int(wt),
                          r.type.c_str(), int(wp), r.params.c_str());
  };
  const std::string rule(wi + wn + wt + wp + 9, '-');
  std::string s = line("", head) + rule + "\n";
  for (size_t i = 0; i < rows.size(); ++i) s += line(std::to_string(i), rows[i]);
  s += rule + "\n";
  const std::string t = readable(total);
  s += detail::format("%-10s Trainable params\n", t.c_str());
  s += detail::format("%-10s Non-trainable params\n", "0");
  s += detail::format("%-10s Total params\n", t.c_str());
  s += detail::format("%-10.3f Total estimated model params size (MB)\n", double(total) * 4 / 1e6);
  return s;
}

}  // namespace hpu
