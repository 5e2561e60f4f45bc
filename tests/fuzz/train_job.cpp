// Fuzz target: the hpu-train job reader (parse_job, the JSON job file with its
// model, data, optimizer, scheduler and trainer sections). Any input must give
// a Job or an hpu::Error with HPU_ERROR_CONFIG or HPU_ERROR_INVALID_ARGUMENT;
// anything else (a crash, another exception, another status) is a bug.
#include <hpu/hpu.hpp>
#include <hpu/trainer/job.hpp>

#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    hpu::Job job = hpu::parse_job(std::string(reinterpret_cast<const char *>(data), size), "<fuzz>");
    // What the reader accepted, hpu-train --check prints back; that must work too.
    hpu::job_to_json(job);
  } catch (const hpu::Error &e) {
    if (e.status() != HPU_ERROR_CONFIG && e.status() != HPU_ERROR_INVALID_ARGUMENT) abort();
  }
  return 0;
}
