// Which vector paths this CPU runs, detected once at run time.
#pragma once

namespace hpu::kernels {

// Levels in order: each one runs everything the lower ones do. amx is avx512
// plus the AMX tile unit's bf16 products (bf16 GEMM only).
enum class Isa { scalar = 0, avx2 = 1, avx512 = 2, amx = 3 };

// avx2 needs AVX2 + F16C + FMA; avx512 needs AVX-512 F + BW + VL; amx needs
// avx512, AVX-512 BF16, AMX-TILE and AMX-BF16, and the operating system's
// permission to use the tile data (asked for once, on the first call that
// needs it; a refusal is logged and leaves amx unsupported).
bool isa_supported(Isa isa);
// The best supported level, unless HPU_KERNEL_ISA ("scalar", "avx2", "avx512",
// "amx") asks for a lower one.
Isa best_isa();
// The level HPU_KERNEL_ISA=want (nullptr: not set) selects when `best` is the
// best supported one: want if it is not above best; else best, with a warning
// (a name above best or an unknown name).
Isa choose_isa(const char *want, Isa best);
const char *isa_name(Isa isa);
// The vector path of a level: amx's vectors are avx512's.
inline Isa vector_isa(Isa isa) { return isa == Isa::amx ? Isa::avx512 : isa; }

}  // namespace hpu::kernels
