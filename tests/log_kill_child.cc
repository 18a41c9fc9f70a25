// Child process for log_kill_test: opens the log and commits records from
// several threads until killed. After each commit is acknowledged it writes
// an Ack (24 bytes, atomic on a pipe) to stdout. Payloads are derived from
// (thread, seq) so the parent can check every byte it recovers.
//
// usage: log_kill_child DIR nf|classic STREAMS THREADS
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "log/redo_log.h"
#include "util/coding.h"

using namespace subito;

namespace {

std::vector<uint8_t> PayloadFor(uint32_t thread, uint32_t seq) {
  uint32_t len = 8 + (seq * 7919 + thread * 104729) % 1500;
  std::vector<uint8_t> p(len);
  EncodeFixed32(p.data(), thread);
  EncodeFixed32(p.data() + 4, seq);
  for (uint32_t i = 8; i < len; ++i) p[i] = static_cast<uint8_t>(thread * 31 + seq * 17 + i);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s DIR nf|classic STREAMS THREADS\n", argv[0]);
    return 2;
  }
  log::LogOptions o;
  o.dir = argv[1];
  auto mode = log::ParseLogWriteMode(argv[2]);
  if (!mode.ok()) {
    std::fprintf(stderr, "%s\n", mode.status().ToString().c_str());
    return 2;
  }
  o.write_mode = *mode;
  o.streams = static_cast<uint32_t>(std::atoi(argv[3]));
  const uint32_t threads = static_cast<uint32_t>(std::atoi(argv[4]));
  o.file_size = 4096 + 256 * 1024;
  o.buffer_size = 128 * 1024;
  log::RedoLog* raw = nullptr;
  o.on_log_full = [&] {
    if (!raw->Checkpoint(raw->durable_lsn()).ok()) std::abort();
  };
  auto log = log::RedoLog::Open(o);
  if (!log.ok()) {
    std::fprintf(stderr, "open: %s\n", log.status().ToString().c_str());
    return 1;
  }
  raw = log->get();
  // The seq numbers continue from what the log holds, so each run's records
  // are distinguishable; the parent passes nothing else.
  uint32_t base = 0;
  Status st = raw->ForEachRecoveredRecord([&](const log::LogRecordView& r) {
    if (r.length >= 8) base = std::max(base, DecodeFixed32(r.payload + 4) + 1);
    return Status::OK();
  });
  if (!st.ok()) return 1;
  std::vector<std::thread> workers;
  for (uint32_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (uint32_t seq = base;; ++seq) {
        auto p = PayloadFor(t, seq);
        auto r = raw->Commit(log::kRecordLogTest, p.data(), static_cast<uint32_t>(p.size()));
        if (!r.ok()) std::abort();
        uint8_t ack[24];
        EncodeFixed32(ack, t);
        EncodeFixed32(ack + 4, seq);
        EncodeFixed64(ack + 8, r->start);
        EncodeFixed64(ack + 16, r->end);
        if (::write(1, ack, sizeof ack) != sizeof ack) std::_Exit(3);
      }
    });
  }
  for (auto& w : workers) w.join();
  return 0;
}
