#include <cstdlib>
#include <new>

#include "algorithms/algorithms.h"

namespace lockstep {

void Scratch::Free::operator()(void* p) const {
  std::free(p);
}

void* Scratch::get(Slot slot, size_t bytes) {
  if (bytes > sizes_[slot] || !blocks_[slot]) {
    size_t rounded = ((bytes + 63) / 64) * 64;
    if (rounded == 0) rounded = 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    blocks_[slot].reset(p);
    sizes_[slot] = rounded;
  }
  return blocks_[slot].get();
}

}  // namespace lockstep
