#include <signal.h>

#include <string_view>

#include "launcher/attempt.h"

namespace lockstep::launcher {

bool RankExit::died_by_itself() const {
  switch (signal) {
    case SIGABRT:  // abort(): std::terminate after an uncaught exception, a failed assertion
    case SIGSEGV:
    case SIGBUS:
    case SIGFPE:
    case SIGILL:
    case SIGTRAP:
    case SIGSYS:
      return true;
    default:
      return false;
  }
}

std::string uncaught_exception(const std::vector<std::string>& stderr_tail) {
  // libstdc++ writes: terminate called after throwing an instance of 'lockstep::NetworkError'
  //                     what():  <message>
  constexpr std::string_view kThrow = "terminate called after throwing an instance of '";
  constexpr std::string_view kWhat = "what():";
  for (size_t i = stderr_tail.size(); i-- > 0;) {
    const std::string& line = stderr_tail[i];
    const size_t at = line.find(kThrow);
    if (at == std::string::npos) continue;
    const size_t begin = at + kThrow.size();
    const size_t end = line.find('\'', begin);
    std::string text =
        "uncaught " + line.substr(begin, end == std::string::npos ? end : end - begin);
    if (i + 1 < stderr_tail.size()) {
      const std::string& next = stderr_tail[i + 1];
      const size_t what = next.find(kWhat);
      if (what != std::string::npos) {
        const size_t message = next.find_first_not_of(' ', what + kWhat.size());
        if (message != std::string::npos) text += ": " + next.substr(message);
      }
    }
    return text;
  }
  return "";
}

}  // namespace lockstep::launcher
