// The Trainer's option table (src/option_fields.cpp) against hpu-train(1):
// every option with a flag is documented under OPTIONS with its job key, every
// documented trainer.* flag is in the table, the JOB FILE section names every
// trainer key and every callback type a job may name; and one range per
// option, whether it comes from a job, a flag or C++.
#include <hpu/trainer.hpp>

#include "option_fields.hpp"
#include "test_util.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <set>

using namespace trainer_test;

namespace {

std::vector<std::string> man_lines() {
  std::ifstream in(std::string(HPU_SOURCE_DIR) + "/man/man1/hpu-train.1");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// roff's "\-" as "-".
std::string unescape(std::string s) { return std::regex_replace(s, std::regex(R"(\\-)"), "-"); }

// OPTIONS: `.BI \-\-name " V"` then `.RB ( key )`: flag -> key.
std::map<std::string, std::string> documented_flags() {
  std::map<std::string, std::string> out;
  std::vector<std::string> l = man_lines();
  std::regex flag(R"(^\.BI? (\\-\\-[a-z\\-]+))"), key(R"(^\.RB \( ([a-z_.]+) \)$)");
  for (size_t i = 0; i + 1 < l.size(); ++i) {
    std::smatch f, k;
    if (std::regex_search(l[i], f, flag) && std::regex_search(l[i + 1], k, key)) out[unescape(f[1])] = k[1];
  }
  return out;
}

// The JOB FILE entry of `name` (".TP", ".B name", then its lines).
std::vector<std::string> job_file_entry(const std::string &name) {
  std::vector<std::string> l = man_lines(), out;
  bool in_section = false;
  for (size_t i = 0; i < l.size(); ++i) {
    if (l[i].rfind(".SH", 0) == 0) in_section = l[i] == ".SH JOB FILE";
    if (!in_section || l[i] != ".TP" || i + 1 >= l.size() || l[i + 1] != ".B " + name) continue;
    for (size_t j = i + 2; j < l.size() && l[j] != ".TP" && l[j].rfind(".SH", 0) != 0; ++j) out.push_back(l[j]);
  }
  return out;
}

}  // namespace

TEST(OptionFields, EveryFlagIsDocumentedWithItsKey) {
  std::map<std::string, std::string> man = documented_flags();
  ASSERT_GT(man.size(), 10u);
  std::set<std::string> table;
  for (const hpu::detail::OptionField &f : hpu::detail::trainer_option_fields()) {
    if (!f.flag) continue;
    table.insert(f.flag);
    ASSERT_EQ(man.count(f.flag), 1u) << f.flag << " is not in hpu-train(1)'s OPTIONS";
    EXPECT_EQ(man[f.flag], std::string("trainer.") + f.key) << f.flag;
  }
  for (const auto &[flag, key] : man) {
    if (key.rfind("trainer.", 0) == 0) {
      EXPECT_EQ(table.count(flag), 1u) << flag << " is documented, not in the table";
    }
  }
}

TEST(OptionFields, TheJobFileSectionNamesEveryTrainerKey) {
  std::vector<std::string> entry = job_file_entry("trainer");
  ASSERT_FALSE(entry.empty());
  // The keys: bold words before the first callback type's options.
  std::set<std::string> man;
  std::regex key(R"(^\.BR? ([a-z_]+)(?: ,)?$)");
  for (const std::string &l : entry) {
    std::smatch m;
    if (l.rfind(".RB (", 0) == 0) break;  // the logger's values: the keys end here
    if (std::regex_search(l, m, key)) man.insert(m[1]);
  }
  man.insert("callbacks");  // named after the logger's values
  std::set<std::string> table;
  for (const hpu::detail::OptionField &f : hpu::detail::trainer_option_fields()) table.insert(f.key);
  EXPECT_EQ(man, table);
}

TEST(OptionFields, TheJobFileSectionNamesEveryCallbackType) {
  std::set<std::string> man;
  std::regex type(R"(^\.B ([A-Z][A-Za-z]+)$)");
  for (const std::string &l : job_file_entry("trainer")) {
    std::smatch m;
    if (std::regex_search(l, m, type)) man.insert(m[1]);
  }
  // The factory's types, from its error for a type it does not know.
  std::string error;
  try {
    hpu::parse_job(R"({"model": {"layers": [{"type": "relu"}]}, "trainer": {"callbacks": [{"type": "Nope"}]}})",
                   "job.json");
  } catch (const hpu::Error &e) {
    error = e.what();
  }
  std::set<std::string> factory;
  std::string list = error.substr(error.find("is not one of"));
  std::regex quoted("\"([A-Za-z]+)\"");
  for (std::sregex_iterator m(list.begin(), list.end(), quoted), end; m != end; ++m) factory.insert((*m)[1]);
  ASSERT_GE(factory.size(), 5u) << error;
  EXPECT_EQ(man, factory);
}

// gradient_clip_val's one range: the same error from a job, a flag and C++,
// and the largest finite value accepted by all three.
TEST(OptionFields, OneRangePerOption) {
  auto job_error = [](const std::string &value, const std::vector<hpu::Override> &ov = {}) {
    try {
      hpu::parse_job(R"({"model": {"layers": [{"type": "relu"}]}, "trainer": {"gradient_clip_val": )" + value + "}}",
                     "job.json", ov);
    } catch (const hpu::Error &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  hpu::TrainerOptions o;
  o.gradient_clip_val = -1;
  std::string cpp;
  try {
    hpu::resolve_options(o, 1);
  } catch (const hpu::Error &e) {
    cpp = e.what();
  }
  EXPECT_EQ(cpp, "gradient_clip_val is -1; expected a finite value >= 0");
  EXPECT_EQ(job_error("-1"), "job.json:1: trainer.gradient_clip_val: " + cpp);
  EXPECT_EQ(job_error("0", {{"trainer.gradient_clip_val", "-1", "--gradient-clip-val"}}),
            "command line --gradient-clip-val: trainer.gradient_clip_val: " + cpp);
  EXPECT_EQ(job_error("1e300"), "");
  o.gradient_clip_val = 1e300;
  EXPECT_NO_THROW(hpu::resolve_options(o, 1));
  o.gradient_clip_val = std::numeric_limits<double>::infinity();
  EXPECT_THROW(hpu::resolve_options(o, 1), hpu::Error);
}

// What a job writes is what it reads: every option of the table survives
// job_to_json and parse_job.
TEST(OptionFields, EveryOptionRoundTrips) {
  hpu::Job a = hpu::parse_job(R"({"model": {"layers": [{"type": "relu"}]}, "trainer": {
    "accelerator": "hpu", "devices": 3, "strategy": "hpu_ddp", "precision": "bf16-mixed", "profiler": "hpu",
    "num_nodes": 2, "max_epochs": 7, "max_steps": 90, "limit_train_batches": 0.5, "limit_val_batches": 4,
    "limit_test_batches": 0.25, "val_check_interval": 12, "check_val_every_n_epoch": 3, "log_every_n_steps": 5,
    "accumulate_grad_batches": 2, "gradient_clip_val": 0.75, "seed": 42, "default_root_dir": "/tmp/x",
    "logger": ["csv", "jsonl"], "enable_progress_bar": false, "enable_checkpointing": false,
    "callbacks": [{"type": "ProgressBar", "refresh_rate": 3}]}})",
                              "a.json");
  std::string text = hpu::job_to_json(a);
  hpu::Job b = hpu::parse_job(text, "b.json");
  EXPECT_EQ(hpu::job_to_json(b), text);
  for (const hpu::detail::OptionField &f : hpu::detail::trainer_option_fields())
    EXPECT_NE(text.find(std::string("\"") + f.key + "\""), std::string::npos) << f.key;
  EXPECT_EQ(b.trainer.gradient_clip_val, 0.75);
  EXPECT_EQ(b.trainer.check_val_every_n_epoch, 3);
  EXPECT_EQ(*b.trainer.seed, 42u);
  EXPECT_FALSE(b.trainer.enable_checkpointing);
}
