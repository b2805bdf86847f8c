// The Python error behind the summary's headline: tracebacks as the interpreter prints them to
// stderr, and the error file torchrun's @record writes (the format of torch 1.13's ErrorHandler).
#include "launcher/python_error.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "launcher_test_util.h"

namespace lockstep::launcher {
namespace {

std::optional<PythonError> scan(const std::string& text) {
  TracebackScanner scanner;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) scanner.feed(line);
  return scanner.last();
}

TEST(PythonTraceback, InnermostFrameAndExceptionLine) {
  auto error = scan(
      "loading data\n"
      "Traceback (most recent call last):\n"
      "  File \"/job/train.py\", line 40, in <module>\n"
      "    main()\n"
      "  File \"/job/train.py\", line 31, in main\n"
      "    step(model)\n"
      "           ^^^^^\n"
      "  File \"/job/model.py\", line 7, in step\n"
      "    raise RuntimeError(\"shapes differ: 3 vs 4\")\n"
      "RuntimeError: shapes differ: 3 vs 4\n");
  ASSERT_TRUE(error);
  EXPECT_EQ(error->exception, "RuntimeError: shapes differ: 3 vs 4");
  EXPECT_EQ(error->file, "/job/model.py");
  EXPECT_EQ(error->line, 7);
  EXPECT_EQ(error->function, "step");
  EXPECT_EQ(error->headline(), "RuntimeError: shapes differ: 3 vs 4 (at /job/model.py:7, in step)");
}

TEST(PythonTraceback, ChainedExceptionsEndWithTheLastOne) {
  auto error = scan(
      "Traceback (most recent call last):\n"
      "  File \"a.py\", line 2, in f\n"
      "    x = {}['k']\n"
      "KeyError: 'k'\n"
      "\n"
      "During handling of the above exception, another exception occurred:\n"
      "\n"
      "Traceback (most recent call last):\n"
      "  File \"a.py\", line 4, in g\n"
      "    raise ValueError('no k')\n"
      "ValueError: no k\n");
  ASSERT_TRUE(error);
  EXPECT_EQ(error->headline(), "ValueError: no k (at a.py:4, in g)");
}

TEST(PythonTraceback, SyntaxErrorOfTheScriptHasNoTracebackHeader) {
  auto error = scan(
      "  File \"/job/train.py\", line 2\n"
      "    echo hi\n"
      "         ^^\n"
      "SyntaxError: invalid syntax\n");
  ASSERT_TRUE(error);
  EXPECT_EQ(error->headline(), "SyntaxError: invalid syntax (at /job/train.py:2)");
}

TEST(PythonTraceback, OrdinaryStderrIsNoError) {
  EXPECT_FALSE(scan("warning: slow\nError: this is not a traceback\n  File \"x\", line"));
  EXPECT_FALSE(scan("Traceback (most recent call last):\n  File \"a.py\", line 1, in f\n"))
      << "a traceback cut off before its exception line is not complete";
}

class ErrorFile : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    std::string path = dir_.file("error.json");
    std::ofstream(path) << text;
    return path;
  }
  testing::TempDir dir_;
};

TEST_F(ErrorFile, RecordsFormatGivesMessageAndInnermostFrame) {
  auto error = read_error_file(write(
      R"({"message": {"message": "ValueError: bad batch\nsecond line", "extraInfo": {)"
      R"("py_callstack": "Traceback (most recent call last):\n  File \"/j/t.py\", line 9, in )"
      R"(main\n    load()\n  File \"/j/d.py\", line 3, in load\n    raise ValueError(\"bad )"
      R"(batch\")\nValueError: bad batch\n", "timestamp": "1700000000"}}})"));
  ASSERT_TRUE(error);
  EXPECT_EQ(error->headline(), "ValueError: bad batch (at /j/d.py:3, in load)");
}

TEST_F(ErrorFile, MissingMalformedOrForeignFilesGiveNothing) {
  EXPECT_FALSE(read_error_file(dir_.file("absent.json")));
  EXPECT_FALSE(read_error_file(write("{not json")));
  EXPECT_FALSE(read_error_file(write(R"({"other": 1})")));
  auto plain = read_error_file(write(R"({"message": "a plain message"})"));
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->headline(), "a plain message");
}

}  // namespace
}  // namespace lockstep::launcher
