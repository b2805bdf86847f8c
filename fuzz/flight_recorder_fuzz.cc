// What `lockstep trace` reads (src/debug/trace_merge.h, flight_recorder_dump.h): flight-recorder
// dumps, which are JSON files a job's ranks left behind, parsed (dump_from_json), sorted and
// deduplicated (parse_dumps), then merged into the text verdict and the Chrome trace.
//
// Input: up to four dumps' texts, separated by NUL bytes (JSON text holds none). Checked: a
// malformed dump is listed as a problem and skipped, never a crash, and the verdict and trace of
// whatever parsed are made without one either.
#include "debug/trace_merge.h"
#include "fuzz_input.h"

using namespace lockstep;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<debug::DumpFile> files;
  for (std::string& text : fuzz::split(fuzz::as_text(data, size), '\0')) {
    if (files.size() == 4) break;
    files.push_back({"dump" + std::to_string(files.size()) + ".json", std::move(text)});
  }
  const debug::LoadedDumps loaded = debug::parse_dumps(files);
  const std::string verdict = debug::trace_verdict(loaded.dumps);
  (void)debug::chrome_trace(loaded.dumps, verdict);
  return 0;
}
