/* libhpu — the profiler: Chrome/Perfetto trace files and a summary table. */
#ifndef HPU_PROFILER_H
#define HPU_PROFILER_H

#include <hpu/status.h>

HPU_EXTERN_C_BEGIN

/* Starts recording every API call, stream operation (op, copy, collective),
 * communicator operation and device memory change into a Chrome trace-event
 * JSON file at `path`, written by hpuProfilerStop (or at exit). HPU_PROFILE=path
 * does the same from the start of the process. */
HPU_API hpuStatus_t hpuProfilerStart(const char *path);

/* Stops recording and writes the trace. */
HPU_API hpuStatus_t hpuProfilerStop(void);

/* The summary of the last stopped profile: operations by total time with
 * their calls (API calls: an op and the casts it queues count once), FLOPs
 * and GFLOP/s, collectives by bytes with algbw and busbw, as a text table.
 * Release *text with hpuFree. */
HPU_API hpuStatus_t hpuProfilerGetSummary(char **text);

HPU_EXTERN_C_END

#endif /* HPU_PROFILER_H */
