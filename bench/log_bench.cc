// Log benchmark: commits/s, p50/p99 commit latency and bytes persisted per
// commit for the nf and classic write paths, 1 and 4 streams, 1-8 threads and
// 64 B / 512 B / 4 KiB records, each beside the raw persist bandwidth of the
// same tier measured in the same run. Not a test: it prints and writes JSON.
//
// usage: log_bench [--dir D] [--seconds S] [--json FILE] [--quick]
#include <libpmem.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "log/redo_log.h"
#include "pmem/pm_file.h"
#include "util/strings.h"

using namespace subito;
using Clock = std::chrono::steady_clock;

namespace {

struct Config {
  std::string dir = "/dev/shm/subito-bench";
  double seconds = 1.0;
  std::string json;
  std::vector<int> threads = {1, 2, 4, 8};
  std::vector<uint32_t> sizes = {64, 512, 4096};
  std::vector<uint32_t> streams = {1, 4};
};

struct RawResult {
  uint32_t size;
  double persists_per_s;
  double mb_per_s;
};

struct Run {
  std::string mode;
  uint32_t streams;
  int threads;
  uint32_t record_bytes;
  double commits_per_s;
  double p50_us, p99_us;
  double persisted_per_commit;
  double raw_mb_per_s;
  double fraction_of_raw;  // record bytes/s over raw persist bandwidth
};

// Sequential non-temporal copy + fence of `size`-byte chunks into a mapped
// file of the tier: the most a single writer can persist.
RawResult MeasureRaw(const std::string& dir, uint32_t size, double seconds) {
  std::string path = dir + "/raw";
  std::filesystem::remove(path);
  const size_t len = 64u << 20;
  auto f = pmem::PmFile::Create(path, len);
  if (!f.ok()) {
    std::fprintf(stderr, "%s\n", f.status().ToString().c_str());
    std::exit(1);
  }
  uint8_t* d = (*f)->data();
  std::memset(d, 0, len);  // fault everything in, as the log's prefaulter does
  std::vector<uint8_t> src(size, 0x5a);
  uint64_t ops = 0, off = 0;
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  auto start = Clock::now();
  while (true) {
    for (int i = 0; i < 256; ++i) {
      pmem_memcpy_nodrain(d + off, src.data(), size);
      pmem_drain();
      off += size;
      if (off + size > len) off = 0;
    }
    ops += 256;
    if (Clock::now() >= end) break;
  }
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  f.value().reset();
  std::filesystem::remove(path);
  return {size, ops / secs, ops * size / secs / 1e6};
}

Run MeasureLog(const Config& c, log::LogWriteMode mode, uint32_t streams, int threads,
               uint32_t record, double raw_mb) {
  std::string dir = c.dir + "/log";
  std::filesystem::remove_all(dir);
  log::LogOptions o;
  o.dir = dir;
  o.write_mode = mode;
  o.streams = streams;
  o.file_size = 4096 + (64ull << 20);
  o.buffer_size = 8ull << 20;
  log::RedoLog* raw = nullptr;
  o.on_log_full = [&] { (void)raw->Checkpoint(raw->durable_lsn()); };
  auto opened = log::RedoLog::Open(o);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    std::exit(1);
  }
  raw = opened->get();
  raw->WaitPrefaulted();
  const uint32_t payload = record - log::kRecordHeaderSize;
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::vector<uint32_t>> lat(threads);
  std::vector<uint64_t> counts(threads, 0);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::vector<uint8_t> p(payload, static_cast<uint8_t>(t));
      lat[t].reserve(1 << 20);
      while (!go.load()) std::this_thread::yield();
      while (!stop.load(std::memory_order_relaxed)) {
        auto t0 = Clock::now();
        auto r = raw->Commit(log::kRecordCommit, p.data(), payload);
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
        if (!r.ok()) {
          std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
          std::exit(1);
        }
        if (lat[t].size() < lat[t].capacity()) lat[t].push_back(static_cast<uint32_t>(ns));
        ++counts[t];
      }
    });
  }
  log::LogStats before = raw->stats();
  auto start = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(c.seconds));
  stop = true;
  for (auto& th : ts) th.join();
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  log::LogStats after = raw->stats();
  (void)raw->Close();
  opened.value().reset();
  std::filesystem::remove_all(dir);

  std::vector<uint32_t> all;
  uint64_t commits = 0;
  for (int t = 0; t < threads; ++t) {
    all.insert(all.end(), lat[t].begin(), lat[t].end());
    commits += counts[t];
  }
  Run r;
  r.mode = log::LogWriteModeName(mode);
  r.streams = streams;
  r.threads = threads;
  r.record_bytes = record;
  r.commits_per_s = commits / secs;
  r.p50_us = bench::QuantileUs(all, 0.50);
  r.p99_us = bench::QuantileUs(all, 0.99);
  r.persisted_per_commit =
      commits ? static_cast<double>(after.persisted_bytes - before.persisted_bytes) / commits : 0;
  r.raw_mb_per_s = raw_mb;
  r.fraction_of_raw = r.commits_per_s * record / 1e6 / raw_mb;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return subito::bench::OptionValue(argc, argv, i); };
    if (a == "--dir") {
      c.dir = next();
    } else if (a == "--seconds") {
      c.seconds = std::stod(next());
    } else if (a == "--json") {
      c.json = next();
    } else if (a == "--quick") {
      c.seconds = 0.25;
      c.threads = {1, 4};
      c.sizes = {64, 4096};
    } else {
      std::fprintf(stderr, "usage: %s [--dir D] [--seconds S] [--json FILE] [--quick]\n", argv[0]);
      return 2;
    }
  }
  std::filesystem::create_directories(c.dir);
  std::string tier;
  {
    auto probe = pmem::PmFile::Create(c.dir + "/probe", 1 << 20);
    if (!probe.ok()) {
      std::fprintf(stderr, "%s\n", probe.status().ToString().c_str());
      return 1;
    }
    tier = pmem::PmKindName((*probe)->kind());
  }
  std::filesystem::remove(c.dir + "/probe");
  std::printf("Subito log benchmark\nmachine: %s\ntier: %s in %s\n%.2f s per point\n\n",
              subito::bench::MachineDescription().c_str(), tier.c_str(), c.dir.c_str(), c.seconds);

  std::vector<uint32_t> raw_sizes = c.sizes;
  if (std::find(raw_sizes.begin(), raw_sizes.end(), 256u) == raw_sizes.end())
    raw_sizes.push_back(256);
  std::vector<RawResult> raws;
  for (uint32_t s : raw_sizes) {
    raws.push_back(MeasureRaw(c.dir, s, std::min(c.seconds, 0.5)));
    std::fprintf(stderr, "raw persist %5u B: %10.0f persists/s %8.0f MB/s\n", s,
                 raws.back().persists_per_s, raws.back().mb_per_s);
  }
  auto raw_of = [&](uint32_t s) {
    for (auto& r : raws) {
      if (r.size == s) return r.mb_per_s;
    }
    return 0.0;
  };

  std::vector<Run> runs;
  const size_t total = 2 * c.streams.size() * c.threads.size() * c.sizes.size() + 2;
  size_t n = 0;
  auto t_start = Clock::now();
  auto run = [&](log::LogWriteMode m, uint32_t s, int t, uint32_t size) {
    ++n;
    double elapsed = std::chrono::duration<double>(Clock::now() - t_start).count();
    std::fprintf(stderr, "\r[%3zu/%3zu, %4.0f s] %-7s %2u stream(s) %d thread(s) %4u B ...   ", n,
                 total, elapsed, log::LogWriteModeName(m), s, t, size);
    runs.push_back(MeasureLog(c, m, s, t, size, raw_of(size)));
  };
  for (auto m : {log::LogWriteMode::kNf, log::LogWriteMode::kClassic}) {
    for (uint32_t s : c.streams) {
      for (int t : c.threads) {
        for (uint32_t size : c.sizes) run(m, s, t, size);
      }
    }
  }
  // The latency target's own point: one thread, 256 B records.
  run(log::LogWriteMode::kNf, 1, 1, 256);
  run(log::LogWriteMode::kClassic, 1, 1, 256);
  std::fprintf(stderr, "\n\n");

  std::printf("%-8s %7s %7s %7s %12s %9s %9s %13s %9s\n", "mode", "streams", "threads", "record",
              "commits/s", "p50 us", "p99 us", "bytes/commit", "% of raw");
  for (const Run& r : runs) {
    std::printf("%-8s %7u %7d %6uB %12.0f %9.2f %9.2f %13.0f %8.1f%%\n", r.mode.c_str(), r.streams,
                r.threads, r.record_bytes, r.commits_per_s, r.p50_us, r.p99_us,
                r.persisted_per_commit, 100 * r.fraction_of_raw);
  }
  auto find = [&](const std::string& mode, uint32_t s, int t, uint32_t size) -> const Run* {
    for (const Run& r : runs) {
      if (r.mode == mode && r.streams == s && r.threads == t && r.record_bytes == size) return &r;
    }
    return nullptr;
  };
  struct Target {
    std::string name;
    double value, limit;
    bool higher_is_better;
    std::string unit;
  };
  std::vector<Target> targets;
  if (auto* r = find("nf", 1, 1, 256)) {
    targets.push_back({"nf p50 commit latency, 1 thread, 256 B", r->p50_us, 2.0, false, "us"});
  }
  for (uint32_t size : c.sizes) {
    const Run* nf = find("nf", 1, 1, size);
    const Run* cl = find("classic", 1, 1, size);
    if (nf && cl) {
      targets.push_back({StrFormat("nf / classic commits/s, 1 thread, %u B", size),
                         nf->commits_per_s / cl->commits_per_s, 2.0, true, "x"});
    }
  }
  if (auto* r = find("nf", 1, 1, 4096)) {
    targets.push_back({"nf 4 KiB records, 1 thread, fraction of raw persist bandwidth",
                       r->fraction_of_raw, 0.7, true, ""});
  }
  std::printf("\nTargets (tier: %s)\n", tier.c_str());
  for (const Target& t : targets) {
    bool met = t.higher_is_better ? t.value >= t.limit : t.value <= t.limit;
    std::printf("  %-62s %8.2f%s (%s %.2f%s)  %s\n", t.name.c_str(), t.value, t.unit.c_str(),
                t.higher_is_better ? ">=" : "<=", t.limit, t.unit.c_str(), met ? "met" : "MISSED");
  }

  if (!c.json.empty()) {
    std::ofstream j(c.json);
    j << "{\n  \"machine\": \"" << subito::bench::MachineDescription() << "\",\n  \"tier\": \""
      << tier << "\",\n  \"dir\": \"" << c.dir << "\",\n  \"seconds_per_point\": " << c.seconds
      << ",\n  \"settings\": {\"log_file_size\": " << (4096 + (64ull << 20))
      << ", \"log_buffer_size\": " << (8ull << 20) << ", \"log_write_ahead_size\": 512},\n"
      << "  \"raw\": [\n";
    for (size_t i = 0; i < raws.size(); ++i) {
      j << StrFormat("    {\"size\": %u, \"persists_per_s\": %.0f, \"mb_per_s\": %.1f}%s\n",
                     raws[i].size, raws[i].persists_per_s, raws[i].mb_per_s,
                     i + 1 < raws.size() ? "," : "");
    }
    j << "  ],\n  \"runs\": [\n";
    for (size_t i = 0; i < runs.size(); ++i) {
      const Run& r = runs[i];
      j << StrFormat(
          "    {\"mode\": \"%s\", \"streams\": %u, \"threads\": %d, \"record_bytes\": %u, "
          "\"commits_per_s\": %.0f, \"p50_us\": %.3f, \"p99_us\": %.3f, "
          "\"persisted_bytes_per_commit\": %.1f, \"raw_mb_per_s\": %.1f, "
          "\"fraction_of_raw\": %.4f}%s\n",
          r.mode.c_str(), r.streams, r.threads, r.record_bytes, r.commits_per_s, r.p50_us, r.p99_us,
          r.persisted_per_commit, r.raw_mb_per_s, r.fraction_of_raw,
          i + 1 < runs.size() ? "," : "");
    }
    j << "  ],\n  \"targets\": [\n";
    for (size_t i = 0; i < targets.size(); ++i) {
      const Target& t = targets[i];
      bool met = t.higher_is_better ? t.value >= t.limit : t.value <= t.limit;
      j << StrFormat("    {\"name\": \"%s\", \"value\": %.4f, \"limit\": %.4f, \"met\": %s}%s\n",
                     t.name.c_str(), t.value, t.limit, met ? "true" : "false",
                     i + 1 < targets.size() ? "," : "");
    }
    j << "  ]\n}\n";
    std::printf("\nJSON written to %s\n", c.json.c_str());
  }
  std::filesystem::remove_all(c.dir);
  return 0;
}
