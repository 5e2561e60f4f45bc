// Publishes this process's device figures for hpu-smi (see smi_layout.hpp):
// a thread refreshes the segment every HPU_SMI_INTERVAL (default 500ms);
// HPU_SMI=0 turns publishing off.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/log.hpp"
#include "core/runtime.hpp"
#include "device/device.hpp"
#include "device/smi_layout.hpp"

namespace hpu {

namespace {

struct Publisher {
  smi::Segment *seg = nullptr;
  std::string name;
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::chrono::milliseconds interval{500};
  std::vector<uint64_t> last_busy;
};

Publisher *g_pub = nullptr;

uint64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void refresh(Publisher &p, double seconds) {
  smi::Segment &s = *p.seg;
  int n = std::min(device_count(), smi::kMaxDevices);
  std::vector<smi::DeviceFigures> figs(n);
  for (int i = 0; i < n; ++i) {
    Device &d = device_at(i);
    smi::DeviceFigures &f = figs[i];
    std::memset(&f, 0, sizeof f);
    f.ordinal = d.ordinal();
    f.module_id = d.module_id();
    f.open = d.open_count();
    snprintf(f.profile, sizeof f.profile, "%s", d.profile().c_str());
    MemStats m = d.allocator().stats();
    f.limit = m.limit;
    f.in_use = m.in_use;
    f.max_in_use = m.max_in_use;
    f.num_allocs = m.num_allocs;
    f.num_frees = m.num_frees;
    f.max_alloc_size = m.max_alloc_size;
    f.total_system_allocs = m.total_allocs;
    f.total_system_frees = m.total_frees;
    f.reserved_bytes = m.reserved;
    f.segment_allocs = m.segment_allocs;
    f.segment_frees = m.segment_frees;
    f.comms = d.comm_count();
  }
  for (auto &st : Stream::all()) {
    int i = st->device().ordinal();
    if (i >= n) continue;
    figs[i].streams++;
    figs[i].busy_ns += st->busy_ns();
  }
  p.last_busy.resize(n, 0);
  for (int i = 0; i < n; ++i) {
    uint64_t delta = figs[i].busy_ns >= p.last_busy[i] ? figs[i].busy_ns - p.last_busy[i] : 0;
    figs[i].utilization = seconds > 0 ? std::min(1.0, delta / 1e9 / seconds) : 0.0;
    p.last_busy[i] = figs[i].busy_ns;
  }
  // Sequence lock: odd while writing.
  __atomic_add_fetch(&s.seq, 1, __ATOMIC_RELEASE);
  std::memcpy(s.devices, figs.data(), figs.size() * sizeof(smi::DeviceFigures));
  s.num_devices = n;
  s.updated_unix_ns = unix_ns();
  __atomic_add_fetch(&s.seq, 1, __ATOMIC_RELEASE);
}

void run(Publisher *p) {
  auto last = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(p->mu);
  while (!p->stop) {
    p->cv.wait_for(lock, p->interval);
    auto now = std::chrono::steady_clock::now();
    refresh(*p, std::chrono::duration<double>(now - last).count());
    last = now;
  }
}

void start(const Config &c) {
  if (!c.smi) return;
  auto *p = new Publisher();
  p->interval = std::chrono::milliseconds(static_cast<long>(c.smi_interval * 1000));
  p->name = std::string("/") + smi::kPrefix + std::to_string(getpid());
  int fd = shm_open(p->name.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, sizeof(smi::Segment)) != 0) {
    HPU_LOG(warn, "smi", "cannot publish device figures in %s: %s; hpu-smi will not see this process",
            p->name.c_str(), strerror(errno));
    if (fd >= 0) close(fd);
    delete p;
    return;
  }
  void *mem = mmap(nullptr, sizeof(smi::Segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) {
    shm_unlink(p->name.c_str());
    delete p;
    return;
  }
  p->seg = static_cast<smi::Segment *>(mem);
  std::memset(p->seg, 0, sizeof(smi::Segment));
  p->seg->version = smi::kVersion;
  p->seg->pid = getpid();
  p->seg->started_unix_ns = unix_ns();
  char exe[256] = {0};
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  const char *base = len > 0 ? strrchr(exe, '/') : nullptr;
  snprintf(p->seg->process, sizeof p->seg->process, "%s", base ? base + 1 : "?");
  refresh(*p, 0);
  __atomic_store_n(&p->seg->magic, smi::kMagic, __ATOMIC_RELEASE);  // readers trust the segment from here
  p->thread = std::thread(run, p);
  g_pub = p;
}

void stop() {
  Publisher *p = g_pub;
  if (!p) return;
  {
    std::lock_guard<std::mutex> lock(p->mu);
    p->stop = true;
  }
  p->cv.notify_all();
  if (p->thread.joinable()) p->thread.join();
  shm_unlink(p->name.c_str());
  munmap(p->seg, sizeof(smi::Segment));
  g_pub = nullptr;
  delete p;
}

const bool registered = (on_init(15, start), on_shutdown(15, stop), true);

}  // namespace

}  // namespace hpu
