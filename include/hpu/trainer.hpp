// libhpu-trainer: a Lightning-style Trainer on emulated HPUs, built on the
// public C API only. The one header trainer users include. See hpu-train(1).
#pragma once

#include <hpu/hpu.hpp>
#include <hpu/trainer/callback.hpp>
#include <hpu/trainer/callbacks.hpp>
#include <hpu/trainer/checkpoint.hpp>
#include <hpu/trainer/data.hpp>
#include <hpu/trainer/idx.hpp>
#include <hpu/trainer/job.hpp>
#include <hpu/trainer/logger.hpp>
#include <hpu/trainer/module.hpp>
#include <hpu/trainer/nn.hpp>
#include <hpu/trainer/optimizer.hpp>
#include <hpu/trainer/options.hpp>
#include <hpu/trainer/plan.hpp>
#include <hpu/trainer/predictions.hpp>
#include <hpu/trainer/rng.hpp>
#include <hpu/trainer/sampler.hpp>
#include <hpu/trainer/scheduler.hpp>
#include <hpu/trainer/trainer.hpp>
