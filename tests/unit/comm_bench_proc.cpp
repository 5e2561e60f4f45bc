// hpu-bench allreduce-proc prints what hpu-bench(1) says: a table per
// transport and process count, then a "vs-mpi" row per table (the ratio to
// Open MPI at every size, "-" where it did not run) and a "latency" row each
// for shm and tcp (N ranks over 2 at the smallest size, beside the target),
// also for transports and counts the tables did not run.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#ifdef HPU_BENCH_PATH
namespace {

struct Ran {
  int code = -1;
  std::vector<std::string> lines;
};

// The output lines (stderr's too) and exit status of `hpu-bench allreduce-proc args`.
Ran bench(const std::string &args) {
  Ran r;
  if (FILE *p = popen((std::string(HPU_BENCH_PATH) + " allreduce-proc " + args + " 2>&1").c_str(), "r")) {
    char buf[4096];
    while (std::fgets(buf, sizeof buf, p)) r.lines.emplace_back(buf, std::strcspn(buf, "\n"));
    const int status = pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return r;
}

// The lines whose first word is `first`, split into words.
std::vector<std::vector<std::string>> rows(const Ran &r, const std::string &first) {
  std::vector<std::vector<std::string>> out;
  for (const std::string &l : r.lines) {
    std::istringstream in(l);
    std::vector<std::string> w{std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()};
    if (!w.empty() && w[0] == first) out.push_back(std::move(w));
  }
  return out;
}

std::string text(const Ran &r) {
  std::string s;
  for (const std::string &l : r.lines) s += l + "\n";
  return s;
}

// The latency rows: one for shm and one for tcp, each with `n` ranks, two
// positive times and their ratio, and the target.
void expect_latency_rows(const Ran &r, int n) {
  auto lat = rows(r, "latency");
  ASSERT_EQ(lat.size(), 2u) << text(r);
  const char *transports[] = {"shm", "tcp"};
  for (size_t i = 0; i < 2; ++i) {
    const auto &w = lat[i];
    // latency shm 4 12.34 us, 2 ranks 3.21 us: 3.84 x (target <= 4)
    ASSERT_EQ(w.size(), 14u) << text(r);
    EXPECT_EQ(w[1], transports[i]);
    EXPECT_EQ(w[2], std::to_string(n));
    const double many = std::stod(w[3]), two = std::stod(w[7]), ratio = std::stod(w[9]);
    EXPECT_GT(many, 0);
    EXPECT_GT(two, 0);
    EXPECT_NEAR(ratio, many / two, 0.01 + 0.01 * ratio) << text(r);
    EXPECT_EQ(w[10] + " " + w[11] + " " + w[12] + " " + w[13], "x (target <= 4)") << text(r);
  }
}

}  // namespace

TEST(CommBenchProc, TablesAndSummaryForEveryTransportAndRankCount) {
  Ran r = bench("--transport shm,tcp -np 2,3 -b 4 -e 64 -n 2 -w 0 --no-mpi --no-gloo --no-bind");
  ASSERT_EQ(r.code, 0) << text(r);
  std::vector<std::string> headers;
  for (const std::string &l : r.lines)
    if (l.rfind("# hpu-bench allreduce-proc: ", 0) == 0) headers.push_back(l);
  ASSERT_EQ(headers.size(), 4u) << text(r);
  EXPECT_NE(headers[0].find("2 processes x 1 device, transport shm"), std::string::npos) << headers[0];
  EXPECT_NE(headers[1].find("3 processes x 1 device, transport shm"), std::string::npos) << headers[1];
  EXPECT_NE(headers[2].find("2 processes x 1 device, transport tcp"), std::string::npos) << headers[2];
  EXPECT_NE(headers[3].find("3 processes x 1 device, transport tcp"), std::string::npos) << headers[3];
  // Sizes 4, 16 and 64: a ratio (here "-", without Open MPI) for each.
  auto ratios = rows(r, "vs-mpi");
  ASSERT_EQ(ratios.size(), 4u) << text(r);
  const std::vector<std::vector<std::string>> want = {{"vs-mpi", "shm", "2", "-", "-", "-"},
                                                      {"vs-mpi", "shm", "3", "-", "-", "-"},
                                                      {"vs-mpi", "tcp", "2", "-", "-", "-"},
                                                      {"vs-mpi", "tcp", "3", "-", "-", "-"}};
  EXPECT_EQ(ratios, want) << text(r);
  expect_latency_rows(r, 3);
}

TEST(CommBenchProc, LatencyRowsRunTheJobsTheTablesDidNot) {
  // One tcp table of 2 ranks: the latency rows still cover shm and tcp, with 4 ranks.
  Ran r = bench("--transport tcp -np 2 -b 4 -e 4 -n 2 -w 0 --no-mpi --no-gloo --no-bind");
  ASSERT_EQ(r.code, 0) << text(r);
  auto ratios = rows(r, "vs-mpi");
  ASSERT_EQ(ratios.size(), 1u) << text(r);
  EXPECT_EQ(ratios[0], (std::vector<std::string>{"vs-mpi", "tcp", "2", "-"}));
  expect_latency_rows(r, 4);
}

TEST(CommBenchProc, BadListsAreUsageErrors) {
  for (const char *args : {"-np 2,1", "-np 2,", "--transport shm,udp", "--transport tcp,"})
    EXPECT_EQ(bench(args).code, 2) << args;
}
#endif
