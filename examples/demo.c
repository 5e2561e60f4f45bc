/* hpu-demo: opens every emulated device, allocates and copies, and prints each
 * device's properties and memory statistics as a table (hpu-demo(1)). */
#include <hpu/hpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                  \
  do {                                                                               \
    hpuStatus_t s_ = (call);                                                         \
    if (s_ != HPU_SUCCESS) {                                                         \
      fprintf(stderr, "hpu-demo: %s: %s\n", hpuGetErrorName(s_), hpuGetLastErrorMessage()); \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

static double gib(uint64_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }

static int usage(FILE *to) {
  fprintf(to,
          "usage: hpu-demo\n"
          "  opens every emulated device, copies 64 MiB through it and prints each device's\n"
          "  properties and memory statistics, then device statistics as JSON; exits 1 on a failure\n");
  return to == stdout ? 0 : 2;
}

int main(int argc, char **argv) {
  int n = 0;
  if (argc > 1) {
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) return usage(stdout);
    fprintf(stderr, "hpu-demo: unknown argument \"%s\"\n", argv[1]);
    return usage(stderr);
  }
  CHECK(hpuDeviceCount(&n));
  printf("libhpu %s: %d emulated devices\n\n", HPU_VERSION_STRING, n);

  const size_t bytes = 64u << 20; /* 64 MiB per device */
  unsigned char *host = malloc(bytes), *back = malloc(bytes);
  if (!host || !back) return 1;
  for (size_t i = 0; i < bytes; ++i) host[i] = (unsigned char)(i * 31u + 7u);

  printf("%-26s %-7s %6s %10s %10s %13s %10s %9s %8s %13s %9s\n", "device", "profile", "module", "Limit(GiB)",
         "InUse(MiB)", "MaxInUse(MiB)", "NumAllocs", "NumFrees", "Active", "MaxAlloc(MiB)", "copy ok");
  for (int i = 0; i < n; ++i) {
    hpuDevice_t dev;
    CHECK(hpuDeviceOpen(&dev, i));
    hpuDeviceProperties_t props = HPU_DEVICE_PROPERTIES_INIT;
    CHECK(hpuDeviceGetProperties(dev, &props));

    void *a, *b, *scratch;
    CHECK(hpuMemAlloc(&a, dev, bytes));
    CHECK(hpuMemAlloc(&b, dev, bytes));
    CHECK(hpuMemAlloc(&scratch, dev, 1000 + 1000 * (size_t)i));
    CHECK(hpuMemcpy(a, host, bytes, HPU_MEMCPY_HOST_TO_DEVICE));
    CHECK(hpuMemcpy(b, a, bytes, HPU_MEMCPY_DEVICE_TO_DEVICE));
    CHECK(hpuMemcpy(back, b, bytes, HPU_MEMCPY_DEVICE_TO_HOST));
    int ok = memcmp(host, back, bytes) == 0;
    CHECK(hpuMemFree(scratch));

    hpuMemStats_t st = HPU_MEM_STATS_INIT;
    CHECK(hpuMemStats(dev, &st));
    printf("%-26s %-7s %6d %10.1f %10.1f %13.1f %10llu %9llu %8lld %13.1f %9s\n", props.name, props.profile,
           props.module_id, gib(st.limit), st.in_use / 1048576.0, st.max_in_use / 1048576.0,
           (unsigned long long)st.num_allocs, (unsigned long long)st.num_frees, (long long)st.active_allocs,
           st.max_alloc_size / 1048576.0, ok ? "yes" : "NO");
    CHECK(hpuMemFree(a));
    CHECK(hpuMemFree(b));
    if (!ok) return 1;
    if (i == n - 1) {
      char *json;
      CHECK(hpuMemStatsJson(dev, &json));
      printf("\nhpuMemStatsJson(device %d):\n%s\n", i, json);
      hpuFree(json);
    }
    CHECK(hpuDeviceClose(dev));
  }
  free(host);
  free(back);
  return 0;
}
