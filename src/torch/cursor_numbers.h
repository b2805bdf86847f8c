// A sampler cursor (lockstep/torch/data.h, [Resume]) as the 6 numbers both kinds of checkpoint
// store: epoch, begin, end, dataset size, seed, shuffle.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lockstep/torch/data.h"

namespace lockstep::torch {

inline std::vector<int64_t> cursor_numbers(const SamplerCursor& c) {
  return {c.epoch,
          static_cast<int64_t>(c.begin),
          static_cast<int64_t>(c.end),
          static_cast<int64_t>(c.dataset_size),
          static_cast<int64_t>(c.seed),
          c.shuffle};
}

// nullopt when `n` is not 6 numbers.
inline std::optional<SamplerCursor> cursor_from_numbers(const std::vector<int64_t>& n) {
  if (n.size() != 6) return std::nullopt;
  return SamplerCursor{.epoch = n[0],
                       .begin = static_cast<uint64_t>(n[1]),
                       .end = static_cast<uint64_t>(n[2]),
                       .dataset_size = static_cast<uint64_t>(n[3]),
                       .seed = static_cast<uint64_t>(n[4]),
                       .shuffle = n[5] != 0};
}

}  // namespace lockstep::torch
