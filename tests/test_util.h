// Helpers shared by the tests: scratch directories and payload patterns.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "log/log_options.h"

namespace subito::test {

// A fresh empty directory under /dev/shm (or $SUBITO_TEST_DIR), removed when
// the object goes away.
class ScratchDir {
 public:
  ScratchDir();
  // Under `base` instead of $SUBITO_TEST_DIR or /dev/shm (a disk file
  // system, for tests of O_DIRECT, which tmpfs refuses).
  explicit ScratchDir(const std::string& base);
  ~ScratchDir();
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Deterministic payload for (seed, length): the tests check content, not
// just counts.
std::vector<uint8_t> Payload(uint64_t seed, uint32_t length);

// The seed for randomized tests: $SUBITO_SEED or a fresh one; printed so a
// failure can be replayed.
uint64_t TestSeed();

// Small log options suitable for tests (small files, small buffer).
log::LogOptions SmallLog(const std::string& dir, log::LogWriteMode mode, uint32_t streams);

// Lays out a power-cut image as files under `dir`: PM regions named `dwb` go
// to dir/dwb, the other PM regions (log streams) to dir/log/, and the page
// files of the tracked file system to dir/.
void WriteCrashImage(const std::string& dir,
                     const std::map<std::string, std::vector<uint8_t>>& pm_image,
                     const std::map<std::string, std::vector<uint8_t>>& file_image);

// Power-cut instants for a run that spanned clock times [start, end):
// `n` at random, and `n` right after page-file writes of the run (before
// their sync, where torn writes live), taken from `after_writes`.
std::vector<uint64_t> CutTimes(uint64_t start, uint64_t end,
                               const std::vector<uint64_t>& after_writes, int n,
                               std::mt19937_64& rng);

std::vector<uint8_t> ReadFile(const std::string& path);

// Sets every valid checkpoint slot's write_reach (log/format.h I7) in the
// bytes of a log's stream 0 to `reach`, sealed again (0: reach unknown, as
// in slots of builds before I7 and slots written during a backup).
void SetCheckpointReach(std::vector<uint8_t>& stream0, uint64_t reach);

// The write mode x stream count combinations log tests run under.
struct LogCase {
  log::LogWriteMode mode;
  uint32_t streams;
};
void PrintTo(const LogCase& c, std::ostream* os);
std::vector<LogCase> AllLogCases();         // nf and classic, 1 and 4 streams
std::string LogCaseName(const LogCase& c);  // e.g. "nf_4streams"
void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes);
// Files in `dir` whose name ends in `extension` (".sbt", ".run").
size_t CountFiles(const std::string& dir, const std::string& extension);
// Runs `program` with `args`, its stdout piped back; lets it run `ms`
// milliseconds after its first output (30 s at most in all), kills it with
// SIGKILL and returns everything it wrote. Expects it to die of the kill.
std::string RunChildAndKill(const std::string& program, const std::vector<std::string>& args,
                            int ms);

}  // namespace subito::test
