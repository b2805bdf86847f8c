#include "lockstep/core/current_stream.h"

#include <atomic>

namespace lockstep {

namespace {

std::atomic<CurrentStreamSource> g_source{nullptr};

}  // namespace

void set_current_stream_source(CurrentStreamSource source) {
  g_source.store(source);
}

CurrentStreamSource current_stream_source() {
  return g_source.load();
}

}  // namespace lockstep
