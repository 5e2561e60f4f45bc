/* libhpu-trainer's C entry point: runs an hpu-train job in-process and returns
 * what it ended with. Link with -lhpu-trainer (it brings -lhpu). The Trainer's
 * C++ API is <hpu/trainer.hpp>. */
#ifndef HPU_TRAINER_H
#define HPU_TRAINER_H

#include <hpu/status.h>

HPU_EXTERN_C_BEGIN

/* Runs the job that `job_json` describes (hpu-train's JSON job document, see
 * hpu-train(1)) on this process's emulated devices, as `hpu-train JOB.json`
 * would: fit, then the test set unless "test": false. `job_name` names the job
 * in error messages (the file it came from); NULL means "<job>". Blocks until
 * the job ends; under a launcher (hpu_ddp across processes) every process
 * calls it. On success *result_json receives a JSON object, to be released
 * with hpuFree:
 *   {"metrics": {"train_loss": ..., "val_acc": ..., "test_acc": ...},
 *    "test": {...}, "epoch": E, "global_step": S, "global_rank": R,
 *    "world_size": W, "log_dir": "...", "best_model_path": "..." or null}
 * (a metric that is not finite is null). Not thread-safe with another job in
 * the same process. */
HPU_API hpuStatus_t hpuTrainerRunJob(char **result_json, const char *job_json, const char *job_name);

HPU_EXTERN_C_END

#endif /* HPU_TRAINER_H */
