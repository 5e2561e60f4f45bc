/* One process of a multi-process collective job, as a user would write it:
 * hpuCommInitFromEnv, then collectives checked against values computed here.
 * Run by the comm_proc tests (forked and exec'd, under mpirun, in network
 * namespaces). It prints one line on stdout and exits with its status:
 *   OK <first rank> <ranks>                     exit 0
 *   INIT <status> <message>                     exit 2 (hpuCommInitFromEnv failed)
 *   FAIL <status> <monotonic seconds> <message> exit 3 (a collective failed)
 *   WRONG <what>                                exit 4 (a result is wrong)
 * Usage: hpu-comm-job NDEV COUNT [loop]
 *   loop: after the first checked round print "READY" and repeat allreduces
 *   of COUNT floats until one fails (fault tests kill or stop a process). */
#include <hpu/hpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DEV 8

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float value(int rank, size_t i) { return (float)((rank + 1) * 3 + (int)(i % 101)); }

static int fail_line(hpuStatus_t s) {
  printf("FAIL %s %.6f %s\n", hpuGetErrorName(s), now(), hpuGetLastErrorMessage());
  return 3;
}

int main(int argc, char **argv) {
  int ndev = argc > 1 ? atoi(argv[1]) : 1;
  size_t count = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : 1000;
  int loop = argc > 3 && strcmp(argv[3], "loop") == 0;
  hpuDevice_t devs[MAX_DEV];
  hpuComm_t comms[MAX_DEV];
  void *send[MAX_DEV], *recv[MAX_DEV], *gathered[MAX_DEV];
  int ranks = 0, first = 0, d, r;
  size_t i;
  float *host;
  hpuStatus_t s;
  if (ndev < 1 || ndev > MAX_DEV) return 1;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (d = 0; d < ndev; ++d)
    if (hpuDeviceOpen(&devs[d], d) != HPU_SUCCESS) {
      printf("INIT %s %s\n", "HPU_ERROR_INTERNAL", hpuGetLastErrorMessage());
      return 2;
    }
  s = hpuCommInitFromEnv(comms, ndev, devs);
  if (s != HPU_SUCCESS) {
    printf("INIT %s %s\n", hpuGetErrorName(s), hpuGetLastErrorMessage());
    return 2;
  }
  hpuCommCount(comms[0], &ranks);
  hpuCommUserRank(comms[0], &first);
  host = malloc(count * sizeof(float) * (size_t)ranks + 1);
  for (d = 0; d < ndev; ++d) {
    if (hpuMemAlloc(&send[d], devs[d], count * sizeof(float)) != HPU_SUCCESS ||
        hpuMemAlloc(&recv[d], devs[d], count * sizeof(float)) != HPU_SUCCESS ||
        hpuMemAlloc(&gathered[d], devs[d], count * sizeof(float) * (size_t)ranks) != HPU_SUCCESS)
      return fail_line(HPU_ERROR_OUT_OF_MEMORY);
    for (i = 0; i < count; ++i) host[i] = value(first + d, i);
    hpuMemcpy(send[d], host, count * sizeof(float), HPU_MEMCPY_HOST_TO_DEVICE);
  }
  for (;;) {
    for (d = 0; d < ndev; ++d) {
      s = hpuAllreduce(NULL, comms[d], send[d], recv[d], count, HPU_FLOAT32, HPU_SUM);
      if (s == HPU_SUCCESS && !loop) s = hpuAllgather(NULL, comms[d], send[d], gathered[d], count, HPU_FLOAT32);
      if (s != HPU_SUCCESS) break;
    }
    for (d = 0; d < ndev && s == HPU_SUCCESS; ++d) s = hpuDeviceSynchronize(devs[d]);
    if (s != HPU_SUCCESS) {
      free(host);
      return fail_line(s);
    }
    for (d = 0; d < ndev; ++d) {
      hpuMemcpy(host, recv[d], count * sizeof(float), HPU_MEMCPY_DEVICE_TO_HOST);
      for (i = 0; i < count; ++i) {
        float want = 0;
        for (r = 0; r < ranks; ++r) want += value(r, i);
        if (host[i] != want) {
          printf("WRONG allreduce rank %d element %zu: %g, expected %g\n", first + d, i, host[i], want);
          free(host);
          return 4;
        }
      }
      if (loop) continue;
      hpuMemcpy(host, gathered[d], count * sizeof(float) * (size_t)ranks, HPU_MEMCPY_DEVICE_TO_HOST);
      for (r = 0; r < ranks; ++r)
        for (i = 0; i < count; ++i)
          if (host[(size_t)r * count + i] != value(r, i)) {
            printf("WRONG allgather rank %d block %d element %zu\n", first + d, r, i);
            free(host);
            return 4;
          }
    }
    if (!loop) break;
    if (loop == 1) {
      printf("READY\n");
      loop = 2;
    }
  }
  for (d = 0; d < ndev; ++d) {
    hpuMemFree(send[d]);
    hpuMemFree(recv[d]);
    hpuMemFree(gathered[d]);
    hpuCommDestroy(comms[d]);
    hpuDeviceClose(devs[d]);
  }
  free(host);
  printf("OK %d %d\n", first, ranks);
  return 0;
}
