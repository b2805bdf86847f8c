// A fresh folder under the system's temporary directory, removed with everything in it when the
// test is done with it; and whole files written and read as bytes.
#pragma once

#include <string>

namespace lockstep::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The file's bytes ("" when it cannot be read).
std::string read_file(const std::string& path);
// Replaces the file's contents with bytes.
void write_file(const std::string& path, const std::string& bytes);

}  // namespace lockstep::testing
