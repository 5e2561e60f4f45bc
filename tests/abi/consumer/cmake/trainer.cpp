// A C++ consumer of libhpu-trainer (hpu::trainer): reads the installed
// example job (argv[1]) with the C++ API and writes it back, and runs a bad
// job through the C API, which must fail with a message naming the missing key.
#include <hpu/trainer.h>
#include <hpu/trainer.hpp>

#include <cstdio>
#include <string>

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  std::string text = hpu::job_to_json(hpu::load_job(argv[1]));
  if (text.find("fashion_mnist") == std::string::npos) {
    std::fprintf(stderr, "job_to_json of %s names no fashion_mnist: %s\n", argv[1], text.c_str());
    return 1;
  }
  char *result = nullptr;
  hpuStatus_t s = hpuTrainerRunJob("{\"trainer\": {\"max_epochs\": 1}}", "consumer", &result);
  if (s == HPU_SUCCESS || std::string(hpuGetLastErrorMessage()).find("missing key \"model\"") == std::string::npos) {
    std::fprintf(stderr, "a bad job gave %s: %s\n", hpuGetErrorName(s), hpuGetLastErrorMessage());
    return 1;
  }
  std::printf("trainer consumer: ok\n");
  return 0;
}
