#pragma once
// Which Highway targets the CPU kernels are compiled for. Include before any hwy header.
//
// x86-64: AVX-512 (Highway's "AVX3"), AVX2+FMA, SSE4 and the scalar baseline, chosen at
// run time by CPUID. SSSE3 is left out (every SSSE3-only CPU is older than the ones
// OAL targets; SSE4 covers them from 2008 on). aarch64: NEON. SVE is left out: the
// register tiles are arrays of vectors, which SVE's sizeless vector types do not allow.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
