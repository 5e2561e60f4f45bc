#include "kernels/cpu.hpp"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/config.hpp"
#include "core/log.hpp"

namespace hpu::kernels {

namespace {

// CPUID leaf 1: F16C (ECX bit 29), read from CPUID itself: clang 14's
// __builtin_cpu_supports does not know "f16c".
bool cpu_has_f16c() {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

// CPUID leaf 7: AMX-BF16 and AMX-TILE (EDX bits 22 and 24).
bool cpu_has_amx_bf16() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (d >> 22 & 1) && (d >> 24 & 1);
}

// Linux hands out the tile data state (XTILEDATA, xstate component 18) only
// to a process that asks for it (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16);
// the grant covers every thread of the process and its forked children.
bool os_grants_tile_data() {
  static const bool granted = [] {
    constexpr int kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0) return true;
    HPU_LOG(info, "kernels", "the CPU has AMX but the system refused its tile data (arch_prctl: %s); bf16 GEMM runs on AVX-512",
            std::strerror(errno));
    return false;
  }();
  return granted;
}

}  // namespace

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && cpu_has_f16c() && __builtin_cpu_supports("fma");
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
    case Isa::amx:
      return isa_supported(Isa::avx512) && __builtin_cpu_supports("avx512bf16") && cpu_has_amx_bf16() &&
             os_grants_tile_data();
  }
  return false;
}

const char *isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::amx: return "amx";
  }
  return "?";
}

Isa choose_isa(const char *want, Isa best) {
  if (!want) return best;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::amx}) {
    if (std::strcmp(want, isa_name(isa)) == 0) {
      if (static_cast<int>(isa) <= static_cast<int>(best)) return isa;
      HPU_LOG(warn, "kernels", "HPU_KERNEL_ISA=%s is not supported by this CPU; using %s", want, isa_name(best));
      return best;
    }
  }
  HPU_LOG(warn, "kernels", "HPU_KERNEL_ISA=%s is not one of scalar, avx2, avx512, amx; using %s", want,
          isa_name(best));
  return best;
}

Isa best_isa() {
  static const Isa isa = [] {
    Isa best = Isa::scalar;
    for (Isa level : {Isa::avx2, Isa::avx512, Isa::amx})
      if (isa_supported(level)) best = level;
    std::string want = config_now().kernel_isa;
    return choose_isa(want.empty() ? nullptr : want.c_str(), best);
  }();
  return isa;
}

}  // namespace hpu::kernels
