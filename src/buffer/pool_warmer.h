// Buffer pool warm-up: the page list and the PoolWarmer that writes and
// reads it (InnoDB's buffer pool dump and load).
//
// The page list names the pages the pool held. It is written at a clean
// close and every dump interval while the engine runs, so that a start
// after a crash finds a recent one; the next open loads those pages back
// in the background, in file order, many pages per read, so that the pool
// is warm in seconds instead of after one random 16 KiB read per page.
//
// A hint, never a source of bytes: every page is read from its file and
// checked like any read, with its per-page log entries and pending redo
// applied. A list that is missing, damaged (checksums), of another page
// size, or that names pages or spaces no longer there loads less or
// nothing; the open never fails because of it. Format:
// docs/formats/page-list.md.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "buffer/buffer_pool.h"
#include "util/file_io.h"

namespace subito::buffer {

inline constexpr uint32_t kPageListMagic = 0x4C504253;  // "SBPL"
inline constexpr uint16_t kPageListVersion = 1;
inline constexpr uint32_t kPageListHeaderSize = 24;

// Writes `pages` (any order; written sorted) to `path`, through a temporary
// file renamed over it, synced: a crash leaves the old list or the new one.
Status WritePageList(FileSystem* fs, const std::string& path, uint32_t page_size,
                     std::vector<PageId> pages);
// The list at `path`, ascending. NotFound if there is none; Corruption (with
// what is wrong) if its checksums, version or page size do not match.
Result<std::vector<PageId>> ReadPageList(FileSystem* fs, const std::string& path,
                                         uint32_t page_size);

struct PoolWarmerOptions {
  std::string path;  // the page list
  bool load = true;  // load the list's pages at Start
  // Seconds between page-list writes while running; 0: only at Stop.
  uint32_t dump_interval_seconds = 60;
  // Notes for the error log (the load's outcome, a list refused).
  std::function<void(const std::string&)> note;
};

struct PoolWarmerStats {
  uint64_t listed = 0;      // pages the list named, of spaces still open
  uint64_t loaded = 0;      // of them, loaded by the warm-up so far
  bool loading = false;     // the load runs now
  double load_seconds = 0;  // how long the load took, once over (skipped: tiny)
  uint64_t dumps = 0;       // page lists written
  // Stop ended the load before its list was done: the list on disk is still
  // the better one to load next time.
  bool load_cut_short = false;
};

class PoolWarmer {
 public:
  PoolWarmer(BufferPool* pool, FileSystem* fs, PoolWarmerOptions options);
  ~PoolWarmer() { Stop(); }
  PoolWarmer(const PoolWarmer&) = delete;
  PoolWarmer& operator=(const PoolWarmer&) = delete;

  // Starts the thread: the load (if asked for), then the periodic lists.
  void Start();
  // Asks the load to stop before its next read, without waiting.
  void RequestStop();
  // Ends the thread (a load stops between reads). Idempotent.
  void Stop();
  // Writes the list of the pages in the pool now.
  Status Dump();
  PoolWarmerStats stats() const;

 private:
  void Run();
  void Load();
  // Loads a run of one space's pages (ascending, within one read's span).
  // Returns false when the load should end: the engine closes, the pool is
  // full, or a read failed other than with a damaged page.
  bool LoadSpan(uint32_t space, const std::vector<uint32_t>& pages, uint8_t* scratch);

  BufferPool* const pool_;
  FileSystem* const fs_;
  const PoolWarmerOptions options_;
  std::thread thread_;
  std::mutex dump_mu_;  // one list written at a time
  std::mutex mu_;       // the wake-up
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};  // set under mu_; read by the load between spans
  std::atomic<uint64_t> listed_{0}, loaded_{0}, dumps_{0};
  std::atomic<bool> loading_{false}, cut_short_{false};
  std::atomic<double> load_seconds_{0};
  std::string stopped_because_;  // the load's thread only
  uint64_t damaged_ = 0;         // pages left out as damaged; the load's thread only
};

}  // namespace subito::buffer
