// Crash images for the engine's power-cut tests: the settings of a tracked
// run (PM tier tracked flush by flush, page files write by write) and of the
// recovery of its images, and how an image is laid out on disk.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "pmem/tracking_persistence.h"
#include "subito/database.h"
#include "test_util.h"
#include "util/fault_file_system.h"
#include "util/file_io.h"

namespace subito {

inline constexpr int kThreads = 3;
inline constexpr uint64_t kLogFile =
    4096 + 768 * 1024;  // small: checkpoints and relocations happen

// Whether the runs keep small page changes in per-page logs (NV-PPL), in a
// region small enough to fill up.
inline bool g_ppl = false;

// Settings of the tracked runs and of the recoveries of their images.
inline Options CrashOptions(const std::string& dir, const std::string& pm_dir) {
  Options o;
  if (g_ppl) {
    o.ppl_bytes = 4096 + 160 * 320;
    o.ppl_threshold = 256;
    // The cleaners write (mostly into per-page logs) every 96 KiB of redo,
    // not only when the pool runs short: a row change dirties its leaf
    // alone, and small changes must reach the region however slow the run.
    o.max_checkpoint_age_bytes = 96 * 1024;
  }
  o.dir = dir;
  o.pm_dir = pm_dir;
  o.page_size = 4096;
  o.buffer_pool_bytes = 64 * 4096;  // small: evictions and cleaner writes happen
  o.log_file_size = kLogFile;
  o.log_buffer_size = 256 * 1024;
  o.double_write_pages = 8;
  return o;
}

inline Options TrackedOptions(const std::string& pm_dir, FileSystem* fs, pmem::Persistence* pm) {
  Options o = CrashOptions("db", pm_dir);  // "db": a name on the tracked file system
  o.file_system = fs;
  o.persistence = pm;
  return o;
}

// Writes an image: PM regions (named by their paths under from_pm) under
// dir/pm, tracked files (named db/...) under dir.
inline void WriteImage(const std::string& dir, const std::string& from_pm,
                       const std::map<std::string, std::vector<uint8_t>>& pm,
                       const std::map<std::string, std::vector<uint8_t>>& files) {
  std::filesystem::remove_all(dir);
  for (const auto& [name, bytes] : pm) {
    const std::string rel = std::filesystem::path(name).lexically_relative(from_pm).string();
    std::filesystem::create_directories(std::filesystem::path(dir + "/pm/" + rel).parent_path());
    test::WriteFile(dir + "/pm/" + rel, bytes);
  }
  for (const auto& [name, bytes] : files) {
    std::filesystem::create_directories(std::filesystem::path(dir + "/" + name).parent_path());
    test::WriteFile(dir + "/" + name, bytes);
  }
}

// With SUBITO_KEEP_FAILED_IMAGES=<dir> set, an image is copied there before
// its recovery, and the copy stays if the test has failed by the end of the
// scope: the exact bytes to replay a rare failure with.
class FailedImageKeeper {
 public:
  FailedImageKeeper(const std::string& image, uint64_t seed, int cut_no) {
    const char* keep = std::getenv("SUBITO_KEEP_FAILED_IMAGES");
    if (keep == nullptr) return;
    copy_ = std::string(keep) + "/seed" + std::to_string(seed) + "-cut" + std::to_string(cut_no);
    std::filesystem::remove_all(copy_);
    std::filesystem::create_directories(copy_);
    std::filesystem::copy(image, copy_, std::filesystem::copy_options::recursive);
  }
  ~FailedImageKeeper() {
    if (copy_.empty()) return;
    if (::testing::Test::HasFailure()) {
      std::printf("the image before recovery is kept in %s\n", copy_.c_str());
    } else {
      std::filesystem::remove_all(copy_);
    }
  }

 private:
  std::string copy_;
};

// An image's database, as a restart after the power cut opens it.
inline Options PlainOptions(const std::string& dir) {
  return CrashOptions(dir + "/db", dir + "/pm");
}

// One tracked run: its seed and random numbers, one crash clock for the PM
// tier and the page files, and a scratch directory for images.
struct TrackedRun {
  // The image of a power cut at `at` (a random part of the writes not yet
  // synced kept), laid out under dir/<name>.
  std::string CutImage(uint64_t at, const std::string& name) {
    const std::string c = dir.Sub(name);
    WriteImage(c, dir.Sub("pm"), pm.ImageAtTime(at, &rng),
               fs.ImageAtTime(at, rng(), /*keep_random_unsynced=*/true));
    return c;
  }

  const uint64_t seed = test::TestSeed();
  std::mt19937_64 rng{seed};
  std::shared_ptr<CrashClock> clock = std::make_shared<CrashClock>();
  pmem::TrackingPersistence pm{clock};
  TrackingFileSystem fs{clock};
  test::ScratchDir dir;
};

}  // namespace subito
