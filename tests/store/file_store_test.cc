// FileStore specifics: several objects (as separate processes would hold) on one file, removal by
// the last of world_size users, compaction, and files that are not (or no longer fully) ours.
#include <filesystem>
#include <fstream>
#include <thread>

#include "lockstep/core/error.h"
#include "lockstep/store/file_store.h"
#include "store_harness.h"
#include "store_test_util.h"

namespace lockstep::store_test {
namespace {

namespace fs = std::filesystem;

// Held as Store: the concrete classes hide Store::get's default timeout argument.
std::unique_ptr<Store> open_store(const std::string& path, int world_size = -1) {
  return std::make_unique<FileStore>(
      FileStoreOptions{.path = path, .world_size = world_size, .timeout = milliseconds(10'000)});
}

TEST(FileStore, ObjectsOnOneFileSeeEachOthersKeys) {
  TempDir dir;
  auto a = open_store(dir.file("s"));
  std::string got;
  std::thread rank1([&] {
    auto b = open_store(dir.file("s"));
    b->set("from-b", "hello a");
    got = b->get("from-a", milliseconds(10'000));  // set by a after this starts waiting
  });
  EXPECT_EQ(a->get("from-b", milliseconds(10'000)), "hello a");
  a->set("from-a", "hello b");
  rank1.join();
  EXPECT_EQ(got, "hello b");
  EXPECT_EQ(a->num_keys(), 2);
}

TEST(FileStore, LastOfWorldSizeUsersRemovesTheFile) {
  TempDir dir;
  std::string path = dir.file("job");
  auto a = open_store(path, 3);
  auto b = open_store(path, 3);
  auto c = open_store(path, 3);
  a->set("k", "v");
  a.reset();
  b.reset();
  EXPECT_TRUE(fs::exists(path));
  EXPECT_EQ(c->get("k"), "v");
  c.reset();
  EXPECT_FALSE(fs::exists(path));
}

TEST(FileStore, WorldSizeMinusOneKeepsTheFile) {
  TempDir dir;
  open_store(dir.file("kept"))->set("k", "v");
  EXPECT_TRUE(fs::exists(dir.file("kept")));
  EXPECT_EQ(open_store(dir.file("kept"))->get("k"), "v");
}

TEST(FileStore, ForeignFileIsRejectedNamingThePath) {
  TempDir dir;
  std::ofstream(dir.file("notes.txt")) << "these are somebody's notes, not a store\n";
  auto msg = message_of<StoreError>([&] { open_store(dir.file("notes.txt")); });
  EXPECT_CONTAINS(msg, dir.file("notes.txt"));
}

TEST(FileStore, MissingDirectoryIsAStoreErrorNamingThePath) {
  TempDir dir;
  std::string path = dir.file("no/such/dir/store");
  auto msg = message_of<StoreError>([&] { open_store(path); });
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "No such file or directory");
}

// 5000 overwrites of one key would make a ~0.6 MB log; compaction keeps the file small, and a
// second object that last looked before the compactions still reads the right contents.
TEST(FileStore, CompactionKeepsTheFileSmall) {
  TempDir dir;
  auto writer = open_store(dir.file("s"));
  auto reader = open_store(dir.file("s"));
  writer->set("other", "kept");
  EXPECT_EQ(reader->get("other"), "kept");
  std::string value(100, 'v');
  for (int i = 0; i < 5000; ++i) writer->set("hot", value + std::to_string(i));
  writer->delete_key("other");
  EXPECT_LT(fs::file_size(dir.file("s")), 200u * 1024);
  EXPECT_EQ(reader->get("hot"), value + "4999");
  EXPECT_FALSE(reader->check({"other"}));
  EXPECT_EQ(reader->num_keys(), 1);
  EXPECT_EQ(open_store(dir.file("s"))->get("hot"), value + "4999");
}

// A writer that died mid-append leaves a torn record: readers ignore it, the next writer cuts it.
TEST(FileStore, TornRecordAtTheEndIsIgnoredAndOverwritten) {
  TempDir dir;
  auto a = open_store(dir.file("s"));
  a->set("whole", "record");
  {
    std::ofstream torn(dir.file("s"), std::ios::app | std::ios::binary);
    torn << "S" << std::string("\x05\x00\x00\x00", 4) << "ha";  // key length 5, 2 bytes of key
  }
  auto b = open_store(dir.file("s"));
  EXPECT_EQ(b->get("whole"), "record");
  EXPECT_EQ(b->num_keys(), 1);
  b->set("next", "fine");
  EXPECT_EQ(a->get("next"), "fine");
  EXPECT_EQ(a->num_keys(), 2);
}

}  // namespace
}  // namespace lockstep::store_test
