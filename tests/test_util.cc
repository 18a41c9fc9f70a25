#include "test_util.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

extern char** environ;

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "log/format.h"
#include "log/log_reader.h"
#include "util/crc32c.h"

namespace subito::test {

ScratchDir::ScratchDir()
    : ScratchDir(std::getenv("SUBITO_TEST_DIR") ? std::getenv("SUBITO_TEST_DIR") : "/dev/shm") {}

ScratchDir::ScratchDir(const std::string& base) {
  std::string tmpl = base + "/subito-test-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<uint8_t> Payload(uint64_t seed, uint32_t length) {
  std::vector<uint8_t> v(length);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint32_t i = 0; i < length; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<uint8_t>(x);
  }
  return v;
}

uint64_t TestSeed() {
  static uint64_t seed = [] {
    const char* env = std::getenv("SUBITO_SEED");
    uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::cerr << "[ seed ] SUBITO_SEED=" << s << "\n";
    return s;
  }();
  return seed;
}

log::LogOptions SmallLog(const std::string& dir, log::LogWriteMode mode, uint32_t streams) {
  log::LogOptions o;
  o.dir = dir;
  o.write_mode = mode;
  o.streams = streams;
  o.file_size = 4096 + 64 * 1024;
  o.buffer_size = 64 * 1024;
  o.prefault = false;
  return o;
}

void WriteCrashImage(const std::string& dir,
                     const std::map<std::string, std::vector<uint8_t>>& pm_image,
                     const std::map<std::string, std::vector<uint8_t>>& file_image) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/log");
  for (const auto& [name, bytes] : pm_image) {
    const std::string base = std::filesystem::path(name).filename();
    WriteFile(base == "dwb" ? dir + "/dwb" : dir + "/log/" + base, bytes);
  }
  for (const auto& [name, bytes] : file_image) WriteFile(dir + "/" + name, bytes);
}

void PrintTo(const LogCase& c, std::ostream* os) {
  *os << log::LogWriteModeName(c.mode) << ", " << c.streams << " stream(s)";
}

std::vector<LogCase> AllLogCases() {
  return {{log::LogWriteMode::kNf, 1},
          {log::LogWriteMode::kNf, 4},
          {log::LogWriteMode::kClassic, 1},
          {log::LogWriteMode::kClassic, 4}};
}

std::string LogCaseName(const LogCase& c) {
  return std::string(log::LogWriteModeName(c.mode)) + "_" + std::to_string(c.streams) + "streams";
}

std::vector<uint64_t> CutTimes(uint64_t start, uint64_t end,
                               const std::vector<uint64_t>& after_writes, int n,
                               std::mt19937_64& rng) {
  std::vector<uint64_t> times = {end};
  for (int i = 0; i < n; ++i) times.push_back(start + rng() % (end - start));
  // Only writes of the run itself: earlier ones belong to set-up.
  std::vector<uint64_t> in_run;
  for (uint64_t t : after_writes) {
    if (t > start && t <= end) in_run.push_back(t);
  }
  for (int i = 0; i < n && !in_run.empty(); ++i) times.push_back(in_run[rng() % in_run.size()]);
  return times;
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  // One read, not a byte at a time: sanitizer builds read hundreds of MiB.
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  std::vector<uint8_t> bytes(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  return bytes;
}

void SetCheckpointReach(std::vector<uint8_t>& stream0, uint64_t reach) {
  for (size_t off : log::kCheckpointSlotOffset) {
    log::CheckpointSlot slot{};
    std::memcpy(&slot, stream0.data() + off, sizeof slot);
    if (crc32c::Value(&slot, offsetof(log::CheckpointSlot, crc)) != slot.crc) continue;
    slot.write_reach = reach;
    log::SealCheckpointSlot(&slot);
    std::memcpy(stream0.data() + off, &slot, sizeof slot);
  }
}

void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

size_t CountFiles(const std::string& dir, const std::string& extension) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    n += e.path().extension() == extension;
  }
  return n;
}

std::string RunChildAndKill(const std::string& program, const std::vector<std::string>& args,
                            int ms) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::vector<char*> argv{const_cast<char*>(program.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, program.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  EXPECT_EQ(rc, 0) << "cannot start " << program;
  std::string bytes;
  char buf[4096];
  auto stop_at = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool started = false;
  while (std::chrono::steady_clock::now() < stop_at) {
    pollfd pfd{fds[0], POLLIN, 0};
    if (::poll(&pfd, 1, 1) > 0) {
      const ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n <= 0) break;  // the child died on its own: checked below
      bytes.append(buf, static_cast<size_t>(n));
      if (!started) {
        started = true;
        stop_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
      }
    }
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << program << " ended on its own, status " << status;
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) bytes.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  return bytes;
}

}  // namespace subito::test
