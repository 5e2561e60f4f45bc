// hpu-smi: lists the emulated HPU devices of every process using libhpu on
// this host, from the segments they publish (src/device/smi_layout.hpp).
//   hpu-smi [--json] [-l SECONDS] [--keep-stale]
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "device/smi_layout.hpp"

namespace smi = hpu::smi;

namespace {

struct Options {
  bool json = false;
  double loop_seconds = 0;
  bool keep_stale = false;
};

// A consistent copy of a live process's segment, or false.
bool read_segment(const std::string &path, smi::Segment *out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(smi::Segment)) {
    close(fd);
    return false;
  }
  void *mem = mmap(nullptr, sizeof(smi::Segment), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) return false;
  const auto *seg = static_cast<const smi::Segment *>(mem);
  bool ok = false;
  for (int attempt = 0; attempt < 1000 && !ok; ++attempt) {
    uint64_t before = __atomic_load_n(&seg->seq, __ATOMIC_ACQUIRE);
    if (before & 1) {
      std::this_thread::yield();
      continue;
    }
    std::memcpy(static_cast<void *>(out), seg, sizeof(smi::Segment));
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    ok = __atomic_load_n(&seg->seq, __ATOMIC_ACQUIRE) == before;
  }
  munmap(mem, sizeof(smi::Segment));
  return ok && out->magic == smi::kMagic && out->version == smi::kVersion && out->num_devices >= 0 &&
         out->num_devices <= smi::kMaxDevices;
}

bool alive(int pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

std::vector<smi::Segment> collect(const Options &opt) {
  std::vector<smi::Segment> out;
  DIR *dir = opendir("/dev/shm");
  if (!dir) return out;
  size_t plen = strlen(smi::kPrefix);
  while (dirent *e = readdir(dir)) {
    if (strncmp(e->d_name, smi::kPrefix, plen) != 0) continue;
    int pid = atoi(e->d_name + plen);
    std::string path = std::string("/dev/shm/") + e->d_name;
    if (!alive(pid)) {
      // The process died without removing its segment (SIGKILL, crash).
      if (!opt.keep_stale && unlink(path.c_str()) == 0)
        fprintf(stderr, "hpu-smi: removed the stale segment of dead process %d\n", pid);
      continue;
    }
    auto seg = std::make_unique<smi::Segment>();
    if (read_segment(path, seg.get()) && seg->pid == pid) out.push_back(*seg);
  }
  closedir(dir);
  return out;
}

// A size with its unit, as libhpu's messages give it: "512 B", "5 KiB",
// "1.5 GiB" (one decimal when not whole), so that 5120 B do not read 0.0 MiB.
std::string size_text(uint64_t bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  for (; v >= 1024.0 && u < 4; ++u) v /= 1024.0;
  char buf[32];
  if (u == 0)
    snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    snprintf(buf, sizeof buf, v == static_cast<double>(static_cast<uint64_t>(v)) ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

// The devices a process has used (open now, or ever allocated on): the ones
// both the table and --json list.
bool used(const smi::DeviceFigures &d) { return d.open || d.total_system_allocs; }

void print_table(const std::vector<smi::Segment> &segs) {
  time_t now = time(nullptr);
  char when[64];
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&now));
  printf("hpu-smi  %s  %zu process%s\n", when, segs.size(), segs.size() == 1 ? "" : "es");
  printf("%7s %-16s %3s %6s %-7s %4s %7s %5s %5s %11s %11s %11s %9s %9s\n", "PID", "PROCESS", "DEV", "MODULE",
         "PROFILE", "OPEN", "STREAMS", "COMMS", "UTIL%", "InUse", "MaxInUse", "Limit", "NumAllocs", "Active");
  for (const auto &s : segs) {
    for (int i = 0; i < s.num_devices; ++i) {
      const smi::DeviceFigures &d = s.devices[i];
      if (!used(d)) continue;
      printf("%7d %-16.16s %3d %6d %-7s %4d %7d %5d %5.1f %11s %11s %11s %9llu %9lld\n", s.pid, s.process,
             d.ordinal, d.module_id, d.profile, d.open, d.streams, d.comms, 100.0 * d.utilization,
             size_text(d.in_use).c_str(), size_text(d.max_in_use).c_str(), size_text(d.limit).c_str(),
             static_cast<unsigned long long>(d.num_allocs),
             static_cast<long long>(d.num_allocs) - static_cast<long long>(d.num_frees));
    }
  }
  fflush(stdout);
}

void print_json(const std::vector<smi::Segment> &segs) {
  json_t *root = json_array();
  for (const auto &s : segs) {
    json_t *p = json_object();
    json_object_set_new(p, "pid", json_integer(s.pid));
    json_object_set_new(p, "process", json_string(s.process));
    json_object_set_new(p, "updated_unix_ns", json_integer(static_cast<json_int_t>(s.updated_unix_ns)));
    json_t *devs = json_array();
    for (int i = 0; i < s.num_devices; ++i) {
      const smi::DeviceFigures &d = s.devices[i];
      if (!used(d)) continue;
      json_t *o = json_object();
      json_object_set_new(o, "ordinal", json_integer(d.ordinal));
      json_object_set_new(o, "module_id", json_integer(d.module_id));
      json_object_set_new(o, "profile", json_string(d.profile));
      json_object_set_new(o, "open", json_integer(d.open));
      json_object_set_new(o, "streams", json_integer(d.streams));
      json_object_set_new(o, "communicators", json_integer(d.comms));
      json_object_set_new(o, "utilization", json_real(d.utilization));
      const std::pair<const char *, json_int_t> figures[] = {
          {"Limit", (json_int_t)d.limit},
          {"InUse", (json_int_t)d.in_use},
          {"MaxInUse", (json_int_t)d.max_in_use},
          {"NumAllocs", (json_int_t)d.num_allocs},
          {"NumFrees", (json_int_t)d.num_frees},
          {"ActiveAllocs", (json_int_t)d.num_allocs - (json_int_t)d.num_frees},
          {"MaxAllocSize", (json_int_t)d.max_alloc_size},
          {"TotalSystemAllocs", (json_int_t)d.total_system_allocs},
          {"TotalSystemFrees", (json_int_t)d.total_system_frees},
          {"TotalActiveAllocs", (json_int_t)d.total_system_allocs - (json_int_t)d.total_system_frees},
          {"ReservedBytes", (json_int_t)d.reserved_bytes},
          {"SegmentAllocs", (json_int_t)d.segment_allocs},
          {"SegmentFrees", (json_int_t)d.segment_frees},
      };
      json_t *mem = json_object();
      for (const auto &f : figures) json_object_set_new(mem, f.first, json_integer(f.second));
      json_object_set_new(o, "memory", mem);
      json_array_append_new(devs, o);
    }
    json_object_set_new(p, "devices", devs);
    json_array_append_new(root, p);
  }
  char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  printf("%s\n", text ? text : "[]");
  free(text);
  json_decref(root);
  fflush(stdout);
}

int usage(FILE *to) {
  fprintf(to,
          "usage: hpu-smi [--json] [-l SECONDS] [--keep-stale]\n"
          "  --json        one JSON document (an array of processes)\n"
          "  -l SECONDS    print again every SECONDS until interrupted\n"
          "  --keep-stale  do not remove segments left by dead processes\n");
  return to == stdout ? 0 : 2;
}

}  // namespace

int main(int argc, char **argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json") {
      opt.json = true;
    } else if (a == "--keep-stale") {
      opt.keep_stale = true;
    } else if ((a == "-l" || a == "--loop") && i + 1 < argc) {
      char *end;
      opt.loop_seconds = strtod(argv[++i], &end);
      if (*end || !(opt.loop_seconds > 0)) {
        fprintf(stderr, "hpu-smi: -l %s: expected a positive number of seconds\n", argv[i]);
        return usage(stderr);
      }
    } else if (a == "-h" || a == "--help") {
      return usage(stdout);
    } else {
      fprintf(stderr, "hpu-smi: unknown argument \"%s\"\n", argv[i]);
      return usage(stderr);
    }
  }
  for (;;) {
    auto segs = collect(opt);
    if (opt.json)
      print_json(segs);
    else
      print_table(segs);
    if (opt.loop_seconds <= 0) return 0;
    std::this_thread::sleep_for(std::chrono::duration<double>(opt.loop_seconds));
    if (!opt.json) printf("\n");
  }
}
