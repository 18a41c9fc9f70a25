// ExternalSorter: sorts more byte strings than fit its memory budget, as
// the bulk loader and index creation need for the keys of a large table.
// Strings are kept in one arena; past the budget the arena is sorted and
// written out as a run; Finish merges the runs (and what is still in
// memory) and hands out every string in memcmp order (a shorter string
// first on a common prefix: std::string_view's order, the B-tree's).
//
// Runs have levels: a spilled arena is level 0, and kMaxFanIn runs of one
// level are merged into one run of the next, so at most kMaxFanIn runs are
// ever merged at once (each with a read buffer of its share of the budget,
// at least 64 KiB) and a string is rewritten about log_kMaxFanIn(input /
// budget) times.
//
// Run file (temporary, never read after a restart; removed by the
// destructor, and those of a crashed process by RemoveStaleRuns):
//   records, each u32 length then the bytes, back to back (a record may
//   cross any read boundary), zero-padded to a multiple of 4 KiB. The
//   record count is kept in memory, not in the file.
// Buffers, offsets and lengths are 4 KiB aligned, so the file system may
// use O_DIRECT.
//
// The arena and its index count against the budget by their capacity.
// After any failure every later call returns that failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/file_io.h"

namespace subito {

class ExternalSorter {
 public:
  static constexpr size_t kMaxFanIn = 64;

  // Runs go to `dir`, named "<dir>/sort-<pid>-<n>.run"; memory_bytes bounds
  // the arena (at least 64 KiB is used).
  ExternalSorter(FileSystem* fs, std::string dir, size_t memory_bytes);
  ~ExternalSorter();
  ExternalSorter(const ExternalSorter&) = delete;
  ExternalSorter& operator=(const ExternalSorter&) = delete;

  Status Add(std::string_view s);
  // Calls each(s) for every string added, in order, stopping at the first
  // error it returns. Once only.
  Status Finish(const std::function<Status(std::string_view)>& each);
  // Runs written so far (merges included).
  uint64_t runs_written() const { return runs_written_; }
  uint64_t added() const { return added_; }

  // Removes the run files of processes that are gone from dir (the caller
  // holds the directory's lock: no other process sorts there).
  static void RemoveStaleRuns(const std::string& dir);

 private:
  struct Run {
    std::unique_ptr<File> file;
    std::string path;
    uint64_t records = 0;
    uint32_t level = 0;
  };
  class Reader;
  class Writer;
  void SortArena();
  Status Spill();
  Result<Run> NewRun(uint32_t level);
  // Merges runs_[first, first + n) in order into `each`.
  Status Merge(size_t first, size_t n, const std::function<Status(std::string_view)>& each);
  // Merges runs_[first, first + n) into one run of `level`, in their place.
  Status MergeInto(size_t first, size_t n, uint32_t level);
  void RemoveRun(Run& run);
  Status Fail(Status st);

  FileSystem* const fs_;
  const std::string dir_;
  const size_t memory_bytes_;
  std::vector<char> arena_;
  // A string in arena_, with its first 8 bytes as a big-endian number
  // (zero-padded): most comparisons in the sort end at the prefixes.
  struct Item {
    uint64_t prefix;
    uint32_t at, len;
  };
  std::vector<Item> items_;
  std::vector<Run> runs_;  // by level, highest first: a level's runs are adjacent
  uint64_t added_ = 0, runs_written_ = 0;
  bool finished_ = false;
  Status error_;
};

}  // namespace subito
