// Run-time CPU feature checks for the hot loops that have an instruction-set-specific flavour.
// Each answer is computed once and cached; safe to call from any thread.
#pragma once

namespace lockstep::detail {

// Whether this x86 CPU and OS can run AVX2 and F16C code. Always false on other architectures.
bool cpu_has_avx2_f16c();

}  // namespace lockstep::detail
