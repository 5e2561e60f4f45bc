/* A C consumer built with `pkg-config --cflags --libs hpu` against an
 * installed tree: opens a device, copies through it and checks the figures. */
#include <hpu/hpu.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                          \
  do {                                                                       \
    hpuStatus_t s_ = (call);                                                 \
    if (s_ != HPU_SUCCESS) {                                                 \
      fprintf(stderr, "%s: %s: %s\n", #call, hpuGetErrorName(s_),            \
              hpuGetLastErrorMessage());                                     \
      return 1;                                                              \
    }                                                                        \
  } while (0)

int main(void) {
  unsigned char in[3000], out[3000];
  hpuDevice_t dev;
  hpuMemStats_t st = HPU_MEM_STATS_INIT;
  char *json;
  void *p;
  int n;
  if (hpuGetVersion() != HPU_VERSION) {
    fprintf(stderr, "library version %#x, headers %#x\n", hpuGetVersion(), HPU_VERSION);
    return 1;
  }
  for (size_t i = 0; i < sizeof in; ++i) in[i] = (unsigned char)(i * 7u);
  CHECK(hpuDeviceCount(&n));
  CHECK(hpuDeviceOpen(&dev, n - 1));
  CHECK(hpuMemAlloc(&p, dev, sizeof in));
  CHECK(hpuMemcpy(p, in, sizeof in, HPU_MEMCPY_HOST_TO_DEVICE));
  CHECK(hpuMemcpy(out, p, sizeof out, HPU_MEMCPY_DEVICE_TO_HOST));
  CHECK(hpuMemStats(dev, &st));
  CHECK(hpuMemStatsJson(dev, &json));
  int ok = memcmp(in, out, sizeof in) == 0 && st.in_use == 3072 && st.num_allocs == 1 &&
           strstr(json, "\"InUse\": 3072") != NULL;
  hpuFree(json);
  CHECK(hpuMemFree(p));
  CHECK(hpuDeviceClose(dev));
  if (!ok) {
    fprintf(stderr, "pkg-config consumer: wrong results\n");
    return 1;
  }
  printf("pkg-config consumer: libhpu %s, %d devices, ok\n", HPU_VERSION_STRING, n);
  return 0;
}
