/* libhpu-trainer's C entry points: run an hpu-train job in-process and return
 * what it ended with; cancel it from another thread. Link with -lhpu-trainer
 * (it brings -lhpu). The Trainer's C++ API is <hpu/trainer.hpp>. */
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
 * (a metric that is not finite is null). One job runs at a time in a process:
 * HPU_ERROR_INVALID_USAGE while another is running. HPU_ERROR_ABORTED when
 * hpuTrainerCancelJob stopped it. */
HPU_API hpuStatus_t hpuTrainerRunJob(const char *job_json, const char *job_name, char **result_json);

/* Asks the job hpuTrainerRunJob (or hpu::run_job, as hpu-train does on
 * Ctrl-C) is running in this process to stop: it stops before its next
 * training, validation or test batch (a checkpoint being written is finished
 * first, so only whole checkpoint files remain), and hpuTrainerRunJob returns
 * HPU_ERROR_ABORTED. Returns at once. Safe from any thread (from a SIGINT
 * handler, call it on a thread that waits for the signal: it sets the last
 * error message). HPU_ERROR_INVALID_USAGE when no job is running. */
HPU_API hpuStatus_t hpuTrainerCancelJob(void);

HPU_EXTERN_C_END

#endif /* HPU_TRAINER_H */
