// hpu-train jobs: a JSON document (model layers, data, optimizer, scheduler,
// trainer options) read with jansson, with command-line overrides. Every error
// names the key and the line it is on (or the command-line flag that set it).
#pragma once

#include <hpu/memory.h>
#include <hpu/trainer/data.hpp>
#include <hpu/trainer/logger.hpp>
#include <hpu/trainer/options.hpp>
#include <hpu/trainer/predictions.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hpu {

// One entry of the model section's "layers" (hpu-train(1) describes each).
struct LayerSpec {
  std::string type;  // linear relu gelu tanh dropout layernorm embedding flatten residual
  int64_t in_features = 0, out_features = 0;       // linear
  bool bias = true;                                 // linear
  double p = 0.5;                                   // dropout
  int64_t normalized_shape = 0;                     // layernorm; 0: the width before it
  double eps = 1e-5;                                // layernorm
  int64_t num_embeddings = 0, embedding_dim = 0;    // embedding
  std::vector<LayerSpec> layers;                    // residual: x + layers(x)
};

// The data section. "fashion_mnist" reads Debian's Fashion-MNIST from `root`;
// "idx" and "npy" read features and integer labels from the files named
// (relative names under `root` when it is set), as FileData does.
struct DataSpec {
  std::string name = "fashion_mnist";  // "fashion_mnist" | "idx" | "npy"
  std::string root = FashionMNIST::kDefaultRoot;  // "" by default for idx and npy
  int batch_size = 64;
  int64_t val_size = 5000;              // 0 by default for idx and npy
  FileDataOptions files;                // idx and npy (its val_size is val_size)
};

struct OptimizerSpec {
  std::string name = "adamw";  // "sgd" | "adamw"
  double lr = 1e-3;
  double momentum = 0.0;       // sgd
  bool nesterov = false;       // sgd
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adamw
  // Parameters without weight decay (a param group with weight_decay 0):
  // an entry names the last part of a parameter's name ("bias", "weight")
  // or part of its layer's type, ignoring case ("norm": LayerNorm's).
  std::vector<std::string> no_weight_decay;
};

struct SchedulerSpec {
  std::string name = "none";   // "none" | "step" | "cosine" | "plateau"
  int64_t step_size = 1;       // step
  double gamma = 0.1;          // step
  int64_t warmup_steps = 0;    // cosine
  int64_t total_steps = 0;     // cosine; 0: the run's total optimizer steps
  double min_lr = 0.0;         // cosine, plateau
  std::string interval;        // "step" | "epoch"; "": step for cosine, epoch for step and plateau (epoch only)
  // plateau: ReduceLROnPlateau's options (scheduler.hpp) but min_lr.
  std::string monitor = "val_loss";
  std::string mode = "min";
  double factor = 0.1;
  int patience = 10;
  double threshold = 1e-4;
  std::string threshold_mode = "rel";
  int cooldown = 0;
};

// What a Classifier is built from: a job's model, optimizer and scheduler.
struct ModelSpec {
  std::vector<LayerSpec> layers;
  OptimizerSpec optimizer;
  SchedulerSpec scheduler;
};

// The spec as a JSON object's text: {"model": {"layers": [...]},
// "optimizer": {...}, "scheduler": {...}}, the sections as job_to_json writes
// them (no "model" when `layers` is empty).
std::string model_spec_to_json(const ModelSpec &spec);
// Reads that text, checking it as parse_job checks those sections (without a
// data set to match); missing sections keep their defaults. hpu::Error
// HPU_ERROR_CONFIG "<source>:<line>: <key>: <problem>".
ModelSpec parse_model_spec(const std::string &text, const std::string &source);

struct Job {
  std::vector<LayerSpec> layers;
  DataSpec data;
  OptimizerSpec optimizer;
  SchedulerSpec scheduler;
  TrainerOptions trainer;
  std::vector<std::string> callback_specs;  // trainer.callbacks entries as JSON text
  // What the job does (hpu-train's subcommand): "fit" (then the test set
  // unless !test), "validate", "test" or "predict" (with ckpt_path's weights).
  std::string command = "fit";
  std::string ckpt_path;       // fit: resume from it; the others: the weights to use
  bool test = true;            // fit: run the test set after fitting
  // The weights that test uses: "" the final ones (as Lightning's
  // trainer.test(model) after fit), "best", "last" or a checkpoint's path.
  std::string test_ckpt_path;
  std::string predict_output = "predictions.csv";  // "predict": {"output": ...}
};

// A command-line override: the job key it sets ("trainer.devices") and the
// flag's text value; `flag` names it in errors.
struct Override {
  std::string key, value, flag;
};

// What hpu-train's command line asks for.
struct Cli {
  std::string config;            // "" = the built-in default job
  std::vector<Override> overrides;
  bool check = false;            // validate and print the job, do not train
  bool help = false, version = false;
};

// Parses hpu-train's arguments (a first argument fit, validate, test or
// predict sets the job's "command"); hpu::Error (HPU_ERROR_INVALID_ARGUMENT)
// for an unknown flag or a missing value, naming it.
Cli parse_cli(int argc, const char *const *argv);
std::string cli_usage();

// Parses a job document. `source` names it in messages (a path). Throws
// hpu::Error with HPU_ERROR_CONFIG: "<source>:<line>: <key>: <problem>", for
// syntax errors, unknown keys, wrong types and out-of-range values.
Job parse_job(const std::string &text, const std::string &source, const std::vector<Override> &overrides = {});
// Reads the file (HPU_ERROR_NOT_FOUND / HPU_ERROR_IO naming the path) and parses it.
Job load_job(const std::string &path, const std::vector<Override> &overrides = {});
// The job as JSON text with every default filled in (hpu-train --check).
std::string job_to_json(const Job &job);

// The data module a data section describes (not yet set up).
std::unique_ptr<DataModule> make_data(const DataSpec &spec);

// Checks a model's layers against the data they will see, samples of
// `sample_shape` ({}: not known) in `num_classes` classes (0: not known;
// `classes` says where that number comes from), and fills in what the data
// decides (a layernorm's normalized_shape of 0). hpu::Error
// (HPU_ERROR_CONFIG) naming the layer's key path and both widths:
// "model.layers[1].in_features: 20, but the data's samples have 16 features".
// parse_job runs it with what the data section tells; run_job again with the
// loaded data.
void check_layers(std::vector<LayerSpec> &layers, const std::vector<int64_t> &sample_shape, int num_classes,
                  const std::string &classes);

class Trainer;

// What a job's run ended with.
struct JobResult {
  std::string command;           // the job's
  Metrics metrics;               // the trainer's callback metrics at the end (train_*, val_*, test_*)
  Metrics validate;              // command validate: the validation set's metrics
  Metrics test;                  // the test set's metrics (empty when the job has "test": false)
  Predictions predictions;       // command predict: every row, in data set order
  std::string predictions_path;  // command predict: where global rank 0 wrote them
  int64_t epoch = 0;             // the trainer's current_epoch at the end
  int64_t global_step = 0;       // optimizer steps taken
  int global_rank = 0, world_size = 1;  // of this process's first device
  std::string log_dir;
  std::string best_model_path;   // ModelCheckpoint's best file, "" when none
  std::vector<hpuMemStats_t> memory;  // of this process's devices, at the end
};

// Runs a job as hpu-train does: its data, model and Trainer; for "fit", fit
// (resuming from ckpt_path when set), then the test set when job.test (with
// test_ckpt_path's weights); for "validate" and "test", that stage with
// ckpt_path's weights; for "predict", predictions of the test set with
// ckpt_path's weights, written to predict_output by global rank 0.
// `before_fit` sees the Trainer once its devices are open. hpu::Error for any
// failure.
// One job runs at a time in a process (HPU_ERROR_INVALID_USAGE while another
// runs); hpuTrainerCancelJob (<hpu/trainer.h>) stops it before its next
// batch, with HPU_ERROR_ABORTED.
JobResult run_job(const Job &job, const std::function<void(Trainer &)> &before_fit = {});

}  // namespace hpu
