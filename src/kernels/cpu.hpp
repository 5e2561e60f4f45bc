// Which vector paths this CPU runs, detected once at run time.
#pragma once

namespace hpu::kernels {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2 };

// avx2 needs AVX2 + F16C + FMA; avx512 needs AVX-512 F + BW + VL.
bool isa_supported(Isa isa);
// The best supported path, unless HPU_KERNEL_ISA ("scalar", "avx2", "avx512")
// asks for a lower one.
Isa best_isa();
const char *isa_name(Isa isa);

}  // namespace hpu::kernels
