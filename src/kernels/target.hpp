// HPU_TARGET_BEGIN("isa,...") ... HPU_TARGET_END: the functions between them
// are compiled for those instruction sets (the vector paths that run only
// where cpu.hpp's isa_supported() says the CPU has them). GCC takes
// `#pragma GCC target`; clang, which ignores that pragma, an attribute pushed
// onto every function of the region.
#pragma once

#define HPU_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define HPU_TARGET_BEGIN(isa) HPU_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define HPU_TARGET_END HPU_PRAGMA(clang attribute pop)
#else
#define HPU_TARGET_BEGIN(isa) HPU_PRAGMA(GCC push_options) HPU_PRAGMA(GCC target(isa))
#define HPU_TARGET_END HPU_PRAGMA(GCC pop_options)
#endif
