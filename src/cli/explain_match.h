// Finds the known signatures in a log and ranks them: the most specific first (highest
// priority), then the one that appears earliest in the log.
#pragma once

#include <cstddef>
#include <istream>
#include <string>
#include <vector>

#include "cli/explain_signatures.h"

namespace lockstep::cli::explain {

struct MatchedLine {
  size_t number = 0;  // 1-based line number in the log
  std::string text;   // the line, shortened when very long
};

struct Finding {
  const Signature* signature = nullptr;  // points into the SignatureSet searched
  std::vector<MatchedLine> lines;        // the first few matching lines
  size_t line_count = 0;                 // all matching lines
};

struct LogScan {
  std::vector<Finding> findings;  // ranked, most specific first
  size_t lines_read = 0;
};

// Reads `log` to its end, searching every line for every signature. Keeps at most
// `lines_per_finding` matched lines per signature.
LogScan scan_log(std::istream& log, const SignatureSet& signatures, size_t lines_per_finding = 3);

}  // namespace lockstep::cli::explain
