#include "kernels/cpu.hpp"

#include <cstdlib>
#include <cstring>

#include "core/log.hpp"

namespace hpu::kernels {

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
  }
  return false;
}

const char *isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "?";
}

static Isa detect() {
  Isa best = isa_supported(Isa::avx512) ? Isa::avx512 : isa_supported(Isa::avx2) ? Isa::avx2 : Isa::scalar;
  if (const char *want = std::getenv("HPU_KERNEL_ISA")) {
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
      if (std::strcmp(want, isa_name(isa)) == 0) {
        if (static_cast<int>(isa) <= static_cast<int>(best)) return isa;
        HPU_LOG(warn, "kernels", "HPU_KERNEL_ISA=%s is not supported by this CPU; using %s", want, isa_name(best));
        return best;
      }
    }
    HPU_LOG(warn, "kernels", "HPU_KERNEL_ISA=%s is not one of scalar, avx2, avx512; using %s", want,
            isa_name(best));
  }
  return best;
}

Isa best_isa() {
  static const Isa isa = detect();
  return isa;
}

}  // namespace hpu::kernels
