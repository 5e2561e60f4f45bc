/* libhpu — emulated Gaudi-style HPU devices behind a stable C ABI.
 * The one header users include. See hpu(7). */
#ifndef HPU_HPU_H
#define HPU_HPU_H

#include <hpu/version.h>
#include <hpu/types.h>
#include <hpu/status.h>
#include <hpu/config.h>
#include <hpu/device.h>
#include <hpu/memory.h>
#include <hpu/comm.h>
#include <hpu/tensor.h>
#include <hpu/dlpack.h>
#include <hpu/ops.h>
#include <hpu/autocast.h>
#include <hpu/log.h>
#include <hpu/profiler.h>

#endif /* HPU_HPU_H */
