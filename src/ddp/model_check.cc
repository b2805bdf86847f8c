#include "ddp/model_check.h"

#include <algorithm>
#include <sstream>

#include "lockstep/core/error.h"

namespace lockstep::ddp {

namespace {

constexpr int kMaxRanksShown = 8;

// One line per parameter: "name\tdtype\td0,d1,...\n".
std::string serialize(std::span<const ParamShape> params) {
  std::ostringstream out;
  for (const ParamShape& p : params) {
    out << p.name << '\t' << p.dtype << '\t';
    for (size_t i = 0; i < p.shape.size(); ++i) out << (i ? "," : "") << p.shape[i];
    out << '\n';
  }
  return out.str();
}

std::vector<ParamShape> parse(const std::string& text) {
  std::vector<ParamShape> params;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    ParamShape p;
    size_t a = line.find('\t');
    size_t b = line.find('\t', a + 1);
    p.name = line.substr(0, a);
    p.dtype = line.substr(a + 1, b - a - 1);
    std::istringstream dims(line.substr(b + 1));
    std::string d;
    while (std::getline(dims, d, ',')) p.shape.push_back(std::stoll(d));
    params.push_back(std::move(p));
  }
  return params;
}

// Every rank's serialized list, by two all_gathers (lengths, then bytes).
std::vector<std::string> gather_lists(ProcessGroup& group, const std::string& mine,
                                      std::chrono::milliseconds timeout) {
  const auto n = static_cast<size_t>(group.size());
  std::vector<int64_t> my_len{static_cast<int64_t>(mine.size())};
  std::vector<int64_t> lens(n);
  group.all_gather(view(my_len), view(lens), {.timeout = timeout})->wait();
  std::vector<size_t> counts(lens.begin(), lens.end());
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::vector<uint8_t> all(total);
  ConstBufferView input(mine.data(), mine.size(), DType::u8);
  group.all_gather_v(input, view(all), counts, {.timeout = timeout})->wait();
  std::vector<std::string> lists;
  size_t offset = 0;
  for (size_t c : counts) {
    lists.emplace_back(reinterpret_cast<const char*>(all.data()) + offset, c);
    offset += c;
  }
  return lists;
}

std::string describe(const std::vector<ParamShape>& list, size_t index) {
  if (index >= list.size()) {
    return detail::concat("no parameter there (it has ", list.size(), ")");
  }
  const ParamShape& p = list[index];
  return detail::concat("'", p.name, "' ", shape_string(p.shape), " ", p.dtype);
}

}  // namespace

std::string shape_string(std::span<const int64_t> shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

void verify_same_parameters(ProcessGroup& group, std::span<const ParamShape> params,
                            std::string_view what, std::chrono::milliseconds timeout) {
  std::vector<std::vector<ParamShape>> lists;
  for (const std::string& text : gather_lists(group, serialize(params), timeout)) {
    lists.push_back(parse(text));
  }
  size_t longest = 0;
  for (const auto& l : lists) longest = std::max(longest, l.size());
  for (size_t i = 0; i < longest; ++i) {
    auto differs = [&](const std::vector<ParamShape>& l) {
      bool here = i < l.size(), at_root = i < lists[0].size();
      return here != at_root || (here && !(l[i] == lists[0][i]));
    };
    if (std::none_of(lists.begin(), lists.end(), differs)) continue;
    std::ostringstream msg;
    msg << what << ": the model differs across ranks (group '" << group.name()
        << "'), first at parameter #" << i << ": ";
    msg << "rank 0: " << describe(lists[0], i);
    int shown = 1, agreeing = 0;
    for (size_t r = 1; r < lists.size(); ++r) {
      if (!differs(lists[r])) {
        agreeing += 1;
      } else if (shown++ < kMaxRanksShown) {
        msg << "; rank " << r << ": " << describe(lists[r], i);
      }
    }
    if (shown > kMaxRanksShown) msg << "; and " << shown - kMaxRanksShown << " more ranks";
    if (agreeing > 0) msg << " (" << agreeing << " other ranks agree with rank 0)";
    msg << ". Every rank must build the same model (the same layers and sizes, registered in "
           "the same order, with the same dtypes) before wrapping it.";
    throw MismatchError(msg.str());
  }
}

}  // namespace lockstep::ddp
