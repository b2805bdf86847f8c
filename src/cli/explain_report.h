// How `lockstep explain` prints what it found (docs/diagnostics.md shows an example).
#pragma once

#include <cstdio>
#include <string>

#include "cli/explain_match.h"
#include "cli/explain_signatures.h"

namespace lockstep::cli::explain {

// Every finding: its title, the matched lines, the likely causes in order, and the fix.
// `log_name` names the log ("standard input" for -).
void print_findings(std::FILE* out, const LogScan& scan, const SignatureSet& signatures,
                    const std::string& log_name);

// The "nothing recognised" message.
void print_no_match(std::FILE* out, const LogScan& scan, const SignatureSet& signatures,
                    const std::string& log_name);

// One line per signature: id, catalogue entry, priority, title.
void print_signature_list(std::FILE* out, const SignatureSet& signatures);

}  // namespace lockstep::cli::explain
