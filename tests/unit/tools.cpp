// The programs answer as their pages (man/man1) say: -h and --help print the
// usage on stdout and exit 0, without doing anything else; an argument a
// program does not take prints the usage on stderr and exits 2 (hpu-train
// names the problem first). hpu-bench: the same for every command it lists,
// and for an unknown command.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Ran {
  int code = -1;
  std::string out, err;
};

std::string read_file(const std::string &path) {
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

// Runs `program args` through the shell, with its stdout and stderr apart.
Ran run(const std::string &program, const std::string &args) {
  const std::string base = testing::TempDir() + "hpu-tools-" + std::to_string(getpid());
  const std::string cmd = program + " " + args + " >" + base + ".out 2>" + base + ".err </dev/null";
  const int status = std::system(cmd.c_str());
  Ran r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(base + ".out");
  r.err = read_file(base + ".err");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

bool starts_with(const std::string &s, const std::string &prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// -h, --help and a bad argument, for a program whose usage starts with `usage`.
void expect_help_and_bad_argument(const std::string &program, const std::string &before, const std::string &usage) {
  for (const char *help : {"-h", "--help"}) {
    Ran r = run(program, before + help);
    EXPECT_EQ(r.code, 0) << program << " " << before << help << ": " << r.err;
    EXPECT_TRUE(starts_with(r.out, usage)) << program << " " << before << help << " printed: " << r.out;
    EXPECT_EQ(r.err, "") << program << " " << before << help;
  }
  Ran r = run(program, before + "--no-such-option");
  EXPECT_EQ(r.code, 2) << program << " " << before << "--no-such-option: " << r.out;
  EXPECT_NE(r.err.find(usage), std::string::npos) << program << " " << before << "--no-such-option: " << r.err;
  EXPECT_EQ(r.out, "") << program << " " << before << "--no-such-option";
}

}  // namespace

TEST(Tools, SmiHelpAndBadArgument) { expect_help_and_bad_argument(HPU_SMI_PATH, "", "usage: hpu-smi"); }

TEST(Tools, DemoHelpAndBadArgumentDoNotRunTheDemo) {
  expect_help_and_bad_argument(HPU_DEMO_PATH, "", "usage: hpu-demo");
  EXPECT_EQ(run(HPU_DEMO_PATH, "--help").out.find("emulated devices\n"), std::string::npos);
}

TEST(Tools, TrainHelpAndBadArgument) {
  expect_help_and_bad_argument(HPU_TRAIN_PATH, "", "usage: hpu-train");
  // The problem, then the usage that --help prints.
  const std::string usage = run(HPU_TRAIN_PATH, "--help").out;
  for (const char *bad : {"--no-such-option", "-x", "--devices", "a.json b.json"}) {
    Ran r = run(HPU_TRAIN_PATH, bad);
    EXPECT_EQ(r.code, 2) << bad;
    const size_t nl = r.err.find('\n');
    ASSERT_NE(nl, std::string::npos) << bad << ": " << r.err;
    EXPECT_TRUE(starts_with(r.err, "hpu-train: ")) << bad << ": " << r.err;
    EXPECT_EQ(r.err.substr(nl + 1), "\n" + usage) << bad;
  }
  EXPECT_TRUE(starts_with(run(HPU_TRAIN_PATH, "--no-such-option").err, "hpu-train: unknown option --no-such-option\n"));
}

#ifdef HPU_BENCH_PATH
TEST(Tools, BenchAndEveryBenchCommandAnswerHelpAndBadArguments) {
  // Alone and with -h/--help: the list of commands on stdout.
  const std::string list_head = "usage: hpu-bench COMMAND";
  for (const char *args : {"", "-h", "--help"}) {
    Ran r = run(HPU_BENCH_PATH, args);
    EXPECT_EQ(r.code, 0) << "hpu-bench " << args << ": " << r.err;
    EXPECT_TRUE(starts_with(r.out, list_head)) << "hpu-bench " << args << " printed: " << r.out;
  }
  Ran unknown = run(HPU_BENCH_PATH, "no-such-command");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find(list_head), std::string::npos) << unknown.err;

  std::vector<std::string> commands;
  std::istringstream list(run(HPU_BENCH_PATH, "").out);
  bool in_list = false;
  for (std::string line; std::getline(list, line);) {
    if (line == "commands:") in_list = true;
    else if (in_list && starts_with(line, "  ")) commands.push_back(line.substr(2, line.find(' ', 2) - 2));
  }
  ASSERT_GE(commands.size(), 10u);
  for (const std::string &c : commands) expect_help_and_bad_argument(HPU_BENCH_PATH, c + " ", "usage: hpu-bench " + c);
  // --help wins over the other arguments (and runs nothing).
  Ran r = run(HPU_BENCH_PATH, "train --steps 5 --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(starts_with(r.out, "usage: hpu-bench train")) << r.out;
}
#endif
