/* A consumer that uses only dlopen/dlsym on libhpu.so.<major>, with no libhpu
 * header: declares the few types it needs itself, as a binding in another
 * language would. It unloads the library with work still queued, which must
 * neither hang nor crash.  usage: dlopen <major> <version number> */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int status_t; /* hpuStatus_t: HPU_SUCCESS is 0 */
typedef void *handle_t;

#define LOAD(var, name)                                           \
  do {                                                            \
    *(void **)(&var) = dlsym(lib, name);                          \
    if (!var) {                                                   \
      fprintf(stderr, "dlsym(%s): %s\n", name, dlerror());        \
      return 1;                                                   \
    }                                                             \
  } while (0)

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  char soname[64];
  snprintf(soname, sizeof soname, "libhpu.so.%s", argv[1]);
  void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen(%s): %s\n", soname, dlerror());
    return 1;
  }
  int (*get_version)(void);
  const char *(*error_name)(status_t);
  const char *(*last_error)(void);
  status_t (*device_count)(int *);
  status_t (*device_open)(handle_t *, int);
  status_t (*mem_alloc)(void **, handle_t, size_t);
  status_t (*mem_stats_json)(handle_t, char **);
  status_t (*stream_create)(handle_t *, handle_t);
  status_t (*memset_async)(handle_t, void *, int, size_t);
  void (*hpu_free)(void *);
  LOAD(get_version, "hpuGetVersion");
  LOAD(error_name, "hpuGetErrorName");
  LOAD(last_error, "hpuGetLastErrorMessage");
  LOAD(device_count, "hpuDeviceCount");
  LOAD(device_open, "hpuDeviceOpen");
  LOAD(mem_alloc, "hpuMemAlloc");
  LOAD(mem_stats_json, "hpuMemStatsJson");
  LOAD(stream_create, "hpuStreamCreate");
  LOAD(memset_async, "hpuMemsetAsync");
  LOAD(hpu_free, "hpuFree");

  if (get_version() != atoi(argv[2])) {
    fprintf(stderr, "hpuGetVersion() = %d, expected %s\n", get_version(), argv[2]);
    return 1;
  }
  if (strcmp(error_name(3), "HPU_ERROR_OUT_OF_MEMORY") != 0) return 1;
  int n = 0;
  handle_t dev, stream;
  void *p;
  char *json;
  status_t s;
  if ((s = device_count(&n)) != 0 || n < 1 || (s = device_open(&dev, 0)) != 0 ||
      (s = stream_create(&stream, dev)) != 0 || (s = mem_alloc(&p, dev, 64 << 20)) != 0 ||
      (s = mem_stats_json(dev, &json)) != 0) {
    fprintf(stderr, "%s: %s\n", error_name(s), last_error());
    return 1;
  }
  int ok = strstr(json, "\"InUse\": 67108864") != NULL;
  hpu_free(json);
  /* A bad call: the status and the message, not a crash. */
  if (device_open(&dev, n) != 4 /* HPU_ERROR_NOT_FOUND */ || strstr(last_error(), "ordinal") == NULL) ok = 0;
  /* Unload with work queued on a stream that was never synchronized. */
  for (int i = 0; i < 16 && ok; ++i)
    if (memset_async(stream, p, i, 64 << 20) != 0) ok = 0;
  if (dlclose(lib) != 0) {
    fprintf(stderr, "dlclose: %s\n", dlerror());
    return 1;
  }
  if (!ok) {
    fprintf(stderr, "dlopen consumer: wrong results\n");
    return 1;
  }
  printf("dlopen consumer: %d devices, ok\n", n);
  return 0;
}
