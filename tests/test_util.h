// Helpers shared by the tests: scratch directories and payload patterns.
#pragma once

#include <cstdint>
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

std::vector<uint8_t> ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace subito::test
