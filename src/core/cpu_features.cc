#include "core/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace lockstep::detail {
namespace {

#if defined(__x86_64__) || defined(__i386__)
bool detect_avx2_f16c() {
  // __builtin_cpu_supports("avx2") also checks that the OS saves the YMM registers. Some
  // compilers do not know "f16c" there, so read CPUID leaf 1, ECX bit 29 directly.
  if (!__builtin_cpu_supports("avx2")) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx & (1u << 29)) != 0;
}
#else
bool detect_avx2_f16c() {
  return false;
}
#endif

}  // namespace

bool cpu_has_avx2_f16c() {
  static const bool has = detect_avx2_f16c();
  return has;
}

}  // namespace lockstep::detail
