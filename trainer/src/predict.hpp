// Weights loaded from a checkpoint into a model's parameters.
#pragma once

#include <hpu/trainer/checkpoint.hpp>
#include <hpu/trainer/module.hpp>

#include <vector>

namespace hpu::detail {

// Copies the checkpoint's weights ("state_dict/<name>") into `params`.
// hpu::Error HPU_ERROR_INVALID_ARGUMENT naming `source` (the file) and the
// parameter when one is missing, of another dtype or shape, or when the
// checkpoint holds weights the model lacks: a checkpoint of another model.
void load_state_dict(const Checkpoint &ck, const std::vector<Parameter *> &params, const std::string &source);

// Creates the model's parameters on `dev` and loads the checkpoint's weights.
void load_into(LightningModule &model, const Checkpoint &ck, const std::string &source, hpuDevice_t dev);

}  // namespace hpu::detail
