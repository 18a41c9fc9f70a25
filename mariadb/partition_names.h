// The server's names of partitions in engine table names ("db/t#P#p0",
// "db/t#P#p0#SP#s0"; "#TMP#" at the end while ADD, REORGANIZE or COALESCE
// PARTITION rebuilds one). The marks are upper case, or lower case on
// servers with lower_case_table_names.
#pragma once

#include <string>
#include <string_view>

namespace subito::mariadb {

// Where `upper` or else `lower` first occurs in `s` from `from`, or npos.
inline size_t FindMark(std::string_view s, std::string_view upper, std::string_view lower,
                       size_t from = 0) {
  const size_t at = s.find(upper, from);
  return at != std::string_view::npos ? at : s.find(lower, from);
}

// Where a partition's "#P#" begins, or npos for a table.
inline size_t FindPartitionMark(std::string_view name) {
  return FindMark(name, "#P#", "#p#");
}

inline constexpr std::string_view kRebuildMark = "#TMP#";

// Whether the name ends with "#TMP#": a partition being rebuilt.
inline bool IsPartitionBeingRebuilt(std::string_view name) {
  return name.size() > kRebuildMark.size() &&
         (name.substr(name.size() - kRebuildMark.size()) == "#TMP#" ||
          name.substr(name.size() - kRebuildMark.size()) == "#tmp#");
}

}  // namespace subito::mariadb
