// ExternalSorter: sorts more byte strings than fit its memory budget, as
// the bulk loader and index creation need for the keys of a large table.
// Strings are kept in one arena; past the budget the arena is sorted and
// written out as a run; Finish merges the runs (and what is still in
// memory) and hands out every string in memcmp order (a shorter string
// first on a common prefix: std::string_view's order, the B-tree's).
//
// Run file (temporary, never read after a restart; removed by the
// destructor, and left-overs of a crash by RemoveStaleRuns):
//   records, each u32 length then the bytes, back to back (a record may
//   cross any read boundary), zero-padded to a multiple of 4 KiB. The
//   record count is kept in memory, not in the file.
// Buffers, offsets and lengths are 4 KiB aligned, so the file system may
// use O_DIRECT.
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
  // Runs go to `dir` (named "<dir>/sort-<n>.run"); memory_bytes bounds the
  // arena (at least 64 KiB is used).
  ExternalSorter(FileSystem* fs, std::string dir, size_t memory_bytes);
  ~ExternalSorter();
  ExternalSorter(const ExternalSorter&) = delete;
  ExternalSorter& operator=(const ExternalSorter&) = delete;

  Status Add(std::string_view s);
  // Calls each(s) for every string added, in order, stopping at the first
  // error it returns. Once only.
  Status Finish(const std::function<Status(std::string_view)>& each);
  size_t runs() const { return runs_.size(); }
  uint64_t added() const { return added_; }

  // Removes run files a crashed process left in dir.
  static void RemoveStaleRuns(const std::string& dir);

 private:
  struct Run {
    std::unique_ptr<File> file;
    std::string path;
    uint64_t records = 0;
    uint64_t bytes = 0;  // of records, before the padding
  };
  class Reader;
  void SortArena();
  Status Spill();

  FileSystem* const fs_;
  const std::string dir_;
  const size_t memory_bytes_;
  std::vector<char> arena_;
  std::vector<std::pair<uint32_t, uint32_t>> items_;  // offset, length in arena_
  std::vector<Run> runs_;
  uint64_t added_ = 0;
  bool finished_ = false;
};

}  // namespace subito
