// The autocast decision: taken on the thread that enqueues an op, from that
// thread's innermost region and the process-wide lists at that moment.
#include <cstring>

#include "autocast/autocast.hpp"

namespace hpu::autocast {

bool castable(hpuDataType_t t) { return t == HPU_FLOAT16 || t == HPU_BFLOAT16 || t == HPU_FLOAT32; }

hpuDataType_t wider(hpuDataType_t a, hpuDataType_t b) {
  if (a == b) return a;
  if (a == HPU_FLOAT64 || b == HPU_FLOAT64) return HPU_FLOAT64;
  return HPU_FLOAT32;  // any mix of f16, bf16 and f32
}

Decision decide(const char *op, const hpuDataType_t *inputs, size_t count) {
  Decision d;
  State s = current();
  if (!s.enabled) return d;
  d.policy = policy_of(op);
  switch (d.policy) {
    case Policy::none:
      break;
    case Policy::lower_precision:
      d.cast = true;
      d.dtype = s.dtype;
      // Habana's lower_first_arg policy: only the input is cast, not the
      // affine parameters.
      for (const char *n : {"layer_norm", "group_norm", "instance_norm", "batch_norm"})
        if (std::strcmp(op, n) == 0) d.first_arg_only = true;
      break;
    case Policy::fp32:
      d.cast = true;
      d.dtype = HPU_FLOAT32;
      break;
    case Policy::promote: {
      bool any = false;
      for (size_t i = 0; i < count; ++i)
        if (hpuDataType_t t = inputs[i]; castable(t)) d.dtype = any ? wider(d.dtype, t) : t, any = true;
      d.cast = any;
      break;
    }
  }
  return d;
}

}  // namespace hpu::autocast
