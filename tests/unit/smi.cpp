// hpu-smi sees a running process's figures change and a dead one's disappear.
#include <gtest/gtest.h>
#include <hpu/hpu.h>
#include <jansson.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string run_smi(const char *args) {
  std::string cmd = std::string(HPU_SMI_PATH) + " " + args + " 2>/dev/null";
  FILE *p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

// InUse of device 0 of process `pid` as hpu-smi --json reports it; -1 if absent.
long long in_use_of(pid_t pid) {
  std::string text = run_smi("--json");
  json_error_t err;
  json_t *root = json_loads(text.c_str(), 0, &err);
  EXPECT_NE(root, nullptr) << text;
  long long found = -1;
  size_t i;
  json_t *proc;
  json_array_foreach(root, i, proc) {
    if (json_integer_value(json_object_get(proc, "pid")) != pid) continue;
    json_t *dev0 = json_array_get(json_object_get(proc, "devices"), 0);
    found = json_integer_value(json_object_get(json_object_get(dev0, "memory"), "InUse"));
  }
  json_decref(root);
  return found;
}

// Forks a process that publishes every 20 ms and runs `body` until killed;
// body(ready) writes a byte to `ready` once set up, or returns a failure code.
// Returns once the byte came.
pid_t fork_publisher(const std::function<int(int ready)> &body) {
  int to_parent[2];
  if (pipe(to_parent) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    setenv("HPU_SMI_INTERVAL", "20ms", 1);
    _exit(body(to_parent[1]));
  }
  close(to_parent[1]);  // a child that fails before writing ends the read
  char c;
  EXPECT_EQ(read(to_parent[0], &c, 1), 1) << "the publishing process failed to start";
  close(to_parent[0]);
  return pid;
}

// Polls until hpu-smi reports `want` for the child (the child publishes every 20 ms).
bool wait_for_in_use(pid_t pid, long long want) {
  for (int i = 0; i < 200; ++i) {
    if (in_use_of(pid) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace

TEST(Smi, SeesFiguresChangeAndADeadProcessDisappear) {
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("HPU_SMI_INTERVAL", "20ms", 1);
    hpuDevice_t dev;
    void *a, *b;
    char c = 0;
    if (hpuDeviceOpen(&dev, 0) != HPU_SUCCESS || hpuMemAlloc(&a, dev, 1 << 20) != HPU_SUCCESS) _exit(1);
    if (write(to_parent[1], "1", 1) != 1 || read(to_child[0], &c, 1) != 1) _exit(2);
    if (hpuMemAlloc(&b, dev, 2 << 20) != HPU_SUCCESS) _exit(3);
    if (write(to_parent[1], "2", 1) != 1) _exit(4);
    pause();  // until killed
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(to_parent[0], &c, 1), 1);
  EXPECT_TRUE(wait_for_in_use(pid, 1 << 20)) << run_smi("");
  ASSERT_EQ(write(to_child[1], "go", 1), 1);
  ASSERT_EQ(read(to_parent[0], &c, 1), 1);
  EXPECT_TRUE(wait_for_in_use(pid, 3 << 20)) << run_smi("");
  std::string table = run_smi("");
  EXPECT_NE(table.find(std::to_string(pid)), std::string::npos) << table;

  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  std::string segment = "/dev/shm/hpu-smi." + std::to_string(pid);
  EXPECT_EQ(access(segment.c_str(), F_OK), 0) << "a SIGKILLed process leaves its segment";
  EXPECT_EQ(in_use_of(pid), -1);
  EXPECT_NE(access(segment.c_str(), F_OK), 0) << "hpu-smi removes a dead process's segment";
}

TEST(Smi, SegmentIsRemovedAtExit) {
  pid_t pid = fork();
  if (pid == 0) {
    int n;
    exit(hpuDeviceCount(&n) == HPU_SUCCESS ? 0 : 1);  // exit(), not _exit(): the library cleans up
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string segment = "/dev/shm/hpu-smi." + std::to_string(pid);
  EXPECT_NE(access(segment.c_str(), F_OK), 0);
}

TEST(Smi, PublishingCanBeTurnedOffAndBadIntervalIsAConfigError) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("HPU_SMI", "0", 1);
    int n;
    if (hpuDeviceCount(&n) != HPU_SUCCESS) _exit(1);
    std::string segment = "/dev/shm/hpu-smi." + std::to_string(getpid());
    _exit(access(segment.c_str(), F_OK) != 0 ? 0 : 2);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  pid = fork();
  if (pid == 0) {
    setenv("HPU_SMI_INTERVAL", "soon", 1);
    int n;
    if (hpuDeviceCount(&n) != HPU_ERROR_CONFIG) _exit(1);
    _exit(std::string(hpuGetLastErrorMessage()).find("HPU_SMI_INTERVAL=\"soon\"") != std::string::npos ? 0 : 2);
  }
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(Smi, BadArgumentsAreRejected) {
  std::string cmd = std::string(HPU_SMI_PATH) + " --bogus >/dev/null 2>&1";
  int rc = system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
  cmd = std::string(HPU_SMI_PATH) + " -l -3 >/dev/null 2>&1";
  rc = system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
}

// hpu-smi(1): the table and --json list the same devices, those the process
// has used; the table's sizes carry their unit (5120 B is "5 KiB", not
// "0.0" MiB) and --json has the exact bytes.
TEST(Smi, TableAndJsonListTheUsedDevicesWithUnits) {
  pid_t pid = fork_publisher([](int ready) {
    hpuDevice_t dev;
    void *p;
    if (hpuDeviceOpen(&dev, 2) != HPU_SUCCESS || hpuMemAlloc(&p, dev, 5120) != HPU_SUCCESS) return 1;
    if (write(ready, "1", 1) != 1) return 2;
    pause();
    return 0;
  });
  ASSERT_GT(pid, 0);
  std::vector<long long> ordinals;
  long long in_use = -1;
  for (int i = 0; i < 200 && in_use != 5120; ++i) {
    std::string text = run_smi("--json");
    json_error_t err;
    json_t *root = json_loads(text.c_str(), 0, &err);
    ASSERT_NE(root, nullptr) << text;
    size_t at;
    json_t *proc;
    json_array_foreach(root, at, proc) {
      if (json_integer_value(json_object_get(proc, "pid")) != pid) continue;
      ordinals.clear();
      size_t j;
      json_t *dev;
      json_array_foreach(json_object_get(proc, "devices"), j, dev) {
        ordinals.push_back(json_integer_value(json_object_get(dev, "ordinal")));
        in_use = json_integer_value(json_object_get(json_object_get(dev, "memory"), "InUse"));
      }
    }
    json_decref(root);
    if (in_use != 5120) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(ordinals, std::vector<long long>{2});
  EXPECT_EQ(in_use, 5120);
  // The table's rows of this process: PID PROCESS DEV ... UTIL% InUse MaxInUse Limit NumAllocs Active.
  std::vector<std::vector<std::string>> rows;
  std::istringstream table(run_smi(""));
  for (std::string line; std::getline(table, line);) {
    std::istringstream in(line);
    std::vector<std::string> cells;
    for (std::string w; in >> w;) cells.push_back(w);
    if (!cells.empty() && cells[0] == std::to_string(pid)) rows.push_back(cells);
  }
  ASSERT_EQ(rows.size(), 1u);
  const std::vector<std::string> &row = rows[0];
  ASSERT_EQ(row.size(), 17u);
  EXPECT_EQ(row[2], "2");
  EXPECT_EQ(row[9] + " " + row[10], "5 KiB");   // InUse
  EXPECT_EQ(row[11] + " " + row[12], "5 KiB");  // MaxInUse
  EXPECT_EQ(row[14], "GiB");                    // Limit, whole GiB in every profile
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

namespace {

// Device 0 of process `pid` in one hpu-smi --json document; null if absent.
json_t *device0_of(json_t *root, pid_t pid) {
  size_t i;
  json_t *proc;
  json_array_foreach(root, i, proc) {
    if (json_integer_value(json_object_get(proc, "pid")) == pid)
      return json_array_get(json_object_get(proc, "devices"), 0);
  }
  return nullptr;
}

}  // namespace

// A process whose stream is kept busy and which holds a communicator shows
// both; -l prints again and again until interrupted.
TEST(Smi, ShowsUtilizationAndCommunicatorsAndLoops) {
  pid_t pid = fork_publisher([](int ready) {
    hpuDevice_t dev;
    hpuStream_t stream;
    hpuComm_t comm;
    void *buf;
    const size_t bytes = 32 << 20;
    if (hpuDeviceOpen(&dev, 0) != HPU_SUCCESS || hpuStreamCreate(&stream, dev) != HPU_SUCCESS ||
        hpuCommInitAll(&comm, 1, &dev) != HPU_SUCCESS || hpuMemAlloc(&buf, dev, bytes) != HPU_SUCCESS)
      return 1;
    if (write(ready, "1", 1) != 1) return 2;
    for (;;) {  // the stream never idles for long: until killed
      for (int i = 0; i < 4; ++i) hpuMemsetAsync(stream, buf, i, bytes);
      hpuStreamSynchronize(stream);
    }
  });
  ASSERT_GT(pid, 0);
  double utilization = 0;
  long long comms = -1, streams = -1;
  for (int i = 0; i < 200 && utilization <= 0.2; ++i) {
    std::string text = run_smi("--json");
    json_error_t err;
    json_t *root = json_loads(text.c_str(), 0, &err);
    ASSERT_NE(root, nullptr) << text;
    if (json_t *dev0 = device0_of(root, pid)) {
      utilization = json_real_value(json_object_get(dev0, "utilization"));
      comms = json_integer_value(json_object_get(dev0, "communicators"));
      streams = json_integer_value(json_object_get(dev0, "streams"));
    }
    json_decref(root);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(utilization, 0.2) << run_smi("");
  EXPECT_LE(utilization, 1.0);
  EXPECT_EQ(comms, 1);
  EXPECT_GE(streams, 1);

  // -l 0.05: a table every 50 ms until SIGINT; count the tables' column headers.
  const std::string header = "PID PROCESS";
  ASSERT_NE(run_smi("").find(header), std::string::npos);
  int out_pipe[2];
  ASSERT_EQ(pipe(out_pipe), 0);
  pid_t smi = fork();
  if (smi == 0) {
    dup2(out_pipe[1], 1);
    close(out_pipe[0]);
    signal(SIGINT, SIG_DFL);
    execl(HPU_SMI_PATH, HPU_SMI_PATH, "-l", "0.05", static_cast<char *>(nullptr));
    _exit(127);
  }
  close(out_pipe[1]);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  kill(smi, SIGINT);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(out_pipe[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(out_pipe[0]);
  int st = 0;
  waitpid(smi, &st, 0);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT) << st;
  size_t tables = 0;
  for (size_t at = out.find(header); at != std::string::npos; at = out.find(header, at + 1)) ++tables;
  EXPECT_GE(tables, 3u) << out;

  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}
