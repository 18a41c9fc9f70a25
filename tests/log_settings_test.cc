// Bad settings and bad environments give clear errors naming what is wrong.
#include <gtest/gtest.h>

#include <filesystem>

#include "log/redo_log.h"
#include "test_util.h"

namespace subito::log {
namespace {

void ExpectRefused(const LogOptions& o, Status::Code code, const std::string& words) {
  auto log = RedoLog::Open(o);
  ASSERT_FALSE(log.ok()) << "accepted a bad setting, expected: " << words;
  EXPECT_EQ(log.status().code(), code) << log.status().ToString();
  EXPECT_NE(log.status().message().find(words), std::string::npos) << log.status().ToString();
}

class Settings : public ::testing::Test {
 protected:
  LogOptions Base() { return test::SmallLog(dir_.Sub("log"), LogWriteMode::kNf, 1); }
  test::ScratchDir dir_;
};

TEST_F(Settings, SizesMustBeSane) {
  auto inv = Status::Code::kInvalidArgument;
  LogOptions o = Base();
  o.file_size = 0;
  ExpectRefused(o, inv, "log_file_size=0");
  o.file_size = 4096 + 64 * 1024 + 100;
  ExpectRefused(o, inv, "multiple of 4096");
  o = Base();
  o.buffer_size = 100000;
  ExpectRefused(o, inv, "log_buffer_size=100000");
  o.buffer_size = 0;
  ExpectRefused(o, inv, "log_buffer_size=0");
  o = Base();
  for (uint32_t bad : {0u, 32u, 100u, 16384u}) {
    o.write_ahead_size = bad;
    ExpectRefused(o, inv, "log_write_ahead_size=" + std::to_string(bad));
  }
  o = Base();
  for (uint32_t bad : {0u, 17u}) {
    o.streams = bad;
    ExpectRefused(o, inv, "log_streams=" + std::to_string(bad));
  }
  o = Base();
  o.dir = "";
  ExpectRefused(o, inv, "log_dir is empty");
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("log")));  // nothing created on refusal
}

TEST_F(Settings, EdgeValuesAreAccepted) {
  LogOptions o = Base();
  o.write_ahead_size = 64;
  o.streams = 16;
  auto log = RedoLog::Open(o);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_TRUE((*log)->Commit(kRecordLogTest, "x", 1).ok());
  ASSERT_TRUE((*log)->Close().ok());
  o.write_ahead_size = 8192;  // may change between runs
  auto again = RedoLog::Open(o);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->recovered().records, 1u);
}

TEST_F(Settings, UnwritablePlacesAreRefused) {
  LogOptions o = Base();
  o.dir = "/proc/subito-log";
  ExpectRefused(o, Status::Code::kIOError, "cannot create log directory /proc/subito-log");
  test::WriteFile(dir_.Sub("afile"), {1, 2, 3});
  o.dir = dir_.Sub("afile") + "/log";
  ExpectRefused(o, Status::Code::kIOError, "cannot create log directory");
}

TEST_F(Settings, WriteModeNamesParse) {
  EXPECT_EQ(*ParseLogWriteMode("nf"), LogWriteMode::kNf);
  EXPECT_EQ(*ParseLogWriteMode("classic"), LogWriteMode::kClassic);
  auto bad = ParseLogWriteMode("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'fast'"), std::string::npos);
}

TEST_F(Settings, StreamCountIsFixedAtCreation) {
  LogOptions o = Base();
  o.streams = 2;
  { ASSERT_TRUE(RedoLog::Open(o).ok()); }
  o.streams = 3;
  ExpectRefused(o, Status::Code::kInvalidArgument, "has 2 streams but log_streams=3");
}

TEST_F(Settings, MissingStreamFileIsCorruption) {
  LogOptions o = Base();
  o.streams = 3;
  { ASSERT_TRUE(RedoLog::Open(o).ok()); }
  std::filesystem::remove(o.dir + "/log.2");
  ExpectRefused(o, Status::Code::kCorruption, "missing " + o.dir + "/log.2");
}

TEST_F(Settings, OneProcessAtATime) {
  auto first = RedoLog::Open(Base());
  ASSERT_TRUE(first.ok());
  ExpectRefused(Base(), Status::Code::kBusy, "in use by another process");
}

TEST_F(Settings, ModesShareOneFormat) {
  LogOptions o = Base();
  {
    auto log = RedoLog::Open(o);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->Commit(kRecordLogTest, "nf", 2).ok());
  }
  o.write_mode = LogWriteMode::kClassic;
  {
    auto log = RedoLog::Open(o);
    ASSERT_TRUE(log.ok());
    EXPECT_EQ((*log)->recovered().records, 1u);
    ASSERT_TRUE((*log)->Commit(kRecordLogTest, "classic", 7).ok());
    EXPECT_NE((*log)->Describe().find("mode classic"), std::string::npos);
  }
  o.write_mode = LogWriteMode::kNf;
  auto log = RedoLog::Open(o);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ((*log)->recovered().records, 2u);
}

}  // namespace
}  // namespace subito::log
