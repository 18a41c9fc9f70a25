// Child of engine_kill_test: runs the crash workload (engine_workload.h)
// on a database until killed. For every commit it writes two 8-byte
// records to stdout: (thread, 0) before Commit and (thread, 1) after it
// returned.
//
//   engine_kill_child DIR SEED FIRST_THREAD THREADS
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "engine_workload.h"

namespace {

void Emit(uint32_t thread, uint32_t kind) {
  uint32_t rec[2] = {thread, kind};
  if (::write(1, rec, sizeof rec) != sizeof rec) std::_Exit(3);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s DIR SEED FIRST_THREAD THREADS\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  const int first = std::atoi(argv[3]), threads = std::atoi(argv[4]);
  subito::Options o = subito::test::SmallOptions(dir);
  o.log_file_size = 4096 + (2 << 20);
  o.buffer_pool_bytes = 96 * 4096;
  auto db = subito::Database::Open(o);
  if (!db.ok()) {
    std::fprintf(stderr, "open: %s\n", db.status().ToString().c_str());
    return 1;
  }
  subito::Table* t = (*db)->FindTable("t");
  if (t == nullptr) {
    auto created = (*db)->CreateTable(subito::test::SampleTable());
    if (!created.ok()) return 1;
    t = *created;
  }
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&, i] {
      subito::test::ThreadWorkload w(first + i, seed, /*slow=*/i == 0);
      for (;;) {
        bool committed = false;
        subito::Status s =
            w.Next(db->get(), t, &committed, [&](uint32_t) { Emit(static_cast<uint32_t>(i), 0); });
        if (!s.ok()) {
          std::fprintf(stderr, "thread %d: %s\n", first + i, s.ToString().c_str());
          std::_Exit(1);
        }
        if (committed) Emit(static_cast<uint32_t>(i), 1);
      }
    });
  }
  for (auto& w : workers) w.join();
  return 0;
}
