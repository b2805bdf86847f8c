#include "lockstep/comm/options.h"

namespace lockstep {

std::string_view algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::automatic:
      return "automatic";
    case Algorithm::ring:
      return "ring";
    case Algorithm::recursive_doubling:
      return "recursive_doubling";
    case Algorithm::tree:
      return "tree";
    case Algorithm::chain:
      return "chain";
    case Algorithm::direct:
      return "direct";
  }
  return "unknown-algorithm";
}

}  // namespace lockstep
