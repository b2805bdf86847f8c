#include "launcher/help_formatter.h"

namespace lockstep::launcher {

HelpFormatter::HelpFormatter(std::size_t column, bool short_names) : short_names_(short_names) {
  column_width(column);
}

std::string HelpFormatter::entry(const CLI::Option& option) const {
  std::string text = "  ";
  if (short_names_)
    for (const std::string& name : option.get_snames()) text += "-" + name + ", ";
  text += "--" + option.get_lnames().front();
  if (option.get_type_size() > 0) text += " " + option.get_type_name();
  text += text.size() < column_width_ ? std::string(column_width_ - text.size(), ' ') : "  ";
  for (char c : option.get_description()) {
    text += c;
    if (c == '\n') text += std::string(column_width_, ' ');
  }
  return text + "\n";
}

std::string HelpFormatter::make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const {
  std::string text = app->get_description() + "\noptions:\n";
  for (const CLI::Option* option : app->get_options()) text += entry(*option);
  if (std::string footer = app->get_footer(); !footer.empty()) text += "\n" + footer;
  return text;
}

}  // namespace lockstep::launcher
