// The layout of lockstep's --help texts (`lockstep run`, `lockstep bench`), as a CLI11
// formatter: the app's description as written (usage lines and prose), "options:", one entry
// per option in the order declared, then the app's footer, if any.
//
// An entry is "  --name VALUE" (the first long name; with short_names, "-h, " before it) padded
// to the column, or followed by two spaces where it reaches the column, then the option's
// description; the description's further lines (after each '\n') start at the column too.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

namespace lockstep::launcher {

class HelpFormatter : public CLI::FormatterBase {
 public:
  HelpFormatter(std::size_t column, bool short_names);

  std::string make_help(const CLI::App* app, std::string name,
                        CLI::AppFormatMode mode) const override;

 private:
  std::string entry(const CLI::Option& option) const;

  bool short_names_;
};

}  // namespace lockstep::launcher
