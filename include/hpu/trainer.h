/* libhpu-trainer's C entry points: run an hpu-train job in-process and return
 * what it ended with; cancel it from another thread; predict with a saved
 * checkpoint. Link with -lhpu-trainer (it brings -lhpu). The Trainer's C++
 * API is <hpu/trainer.hpp>. */
#ifndef HPU_TRAINER_H
#define HPU_TRAINER_H

#include <hpu/status.h>

#include <stddef.h>
#include <stdint.h>

HPU_EXTERN_C_BEGIN

/* Runs the job that `job_json` describes (hpu-train's JSON job document, see
 * hpu-train(1)) on this process's emulated devices, as `hpu-train JOB.json`
 * would: fit, then the test set unless "test": false. `job_name` names the job
 * in error messages (the file it came from); NULL means "<job>". Blocks until
 * the job ends; under a launcher (hpu_ddp across processes) every process
 * calls it. On success *result_json receives a JSON object, to be released
 * with hpuFree:
 *   {"command": "fit", "metrics": {"train_loss": ..., "val_acc": ...,
 *    "test_acc": ...}, "validate": {...}, "test": {...}, "predict": null,
 *    "epoch": E, "global_step": S, "global_rank": R, "world_size": W,
 *    "log_dir": "...", "best_model_path": "..." or null}
 * (a metric that is not finite is null). The job's "command" picks what it
 * does: "fit" (the default: fit, then test), "validate", "test" or "predict"
 * (with the weights of the job's "ckpt_path"); "validate" and "test" hold
 * those stages' metrics ({} when not run); for "predict", the test set's
 * predictions are written to the job's "predict": {"output": FILE} (CSV) by
 * global rank 0 and "predict" is {"output": FILE, "rows": N, "columns":
 * ["pred", "prob_0", ...]}. One job runs at a time in a process:
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

/* Options of hpuTrainerPredict. */
typedef struct hpuTrainerPredictOptions {
  size_t struct_size;
  int device;            /* this process's device to run on; 0 */
  int64_t batch_size;    /* samples per forward pass, >= 0; 0: 256 */
  const char *precision; /* "32-true" or "bf16-mixed"; NULL: "32-true" */
} hpuTrainerPredictOptions_t;

#define HPU_TRAINER_PREDICT_OPTIONS_INIT {sizeof(hpuTrainerPredictOptions_t), 0, 0, NULL}

/* Lightning's load_from_checkpoint, then predict, without a Trainer: builds
 * the model that the checkpoint at `ckpt_path` describes (its
 * "hyper_parameters", which the checkpoints of hpu-train jobs carry), loads
 * its weights and runs its predict_step over the shape[0] samples at `x`
 * (f32, row-major, `ndim` 2 to 8 dimensions, each >= 1) on one device.
 * `options` may be NULL (the defaults). On success *result_json receives a
 * JSON object, to be released with hpuFree: a row per sample, in order:
 *   {"columns": ["pred", "prob_0", ..., "prob_9"],
 *    "predictions": [[3, 0.01, ...], ...]}
 * (a classifier: the class with the highest score, then the softmax of the
 * scores; a value that is not finite is null). HPU_ERROR_NOT_FOUND when the
 * file does not exist, HPU_ERROR_IO when it is not a valid checkpoint,
 * HPU_ERROR_INVALID_ARGUMENT naming the path when it describes no model (no
 * hyperparameters) or its weights do not match the model it describes, and
 * for a bad argument, named with its value. Thread-safe. */
HPU_API hpuStatus_t hpuTrainerPredict(const char *ckpt_path, const float *x, int ndim, const int64_t *shape,
                                      const hpuTrainerPredictOptions_t *options, char **result_json);

HPU_EXTERN_C_END

#endif /* HPU_TRAINER_H */
