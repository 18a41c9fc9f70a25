// Rows and keys of a table, from its schema (include/subito/database.h).
//
// Key of index i (btree/key_encoding.h, memcomparable):
//   primary     its columns' parts
//   secondary   its columns' parts, then the primary key's parts (so every
//               entry is distinct; a unique index checks the first part)
// Nullable columns carry the NULL marker byte.
//
// Row (the clustered tree's value), format version 1:
//   u8 version = 1, null bitmap (ceil(columns / 8) bytes, bit set = NULL),
//   then each non-NULL column in order: an integer as `width` bytes
//   little-endian; a string as a varint32 length and its bytes.
// A row that does not parse, or whose version is unknown, is Corruption.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "subito/database.h"

namespace subito::engine {

inline constexpr uint8_t kRowFormatVersion = 1;

Status ValidateTableDef(const TableDef& def);
Status ValidateIndexDef(const TableDef& def, const IndexDef& index);
// Checks a full row against the schema and returns it in canonical form
// (kInt columns hold int64_t, kUInt uint64_t).
Result<Row> CanonicalRow(const TableDef& def, const Row& row);

// Key columns of index `index` (0: primary) with the primary key appended
// for secondary indexes.
std::vector<uint32_t> KeyColumns(const TableDef& def, uint32_t index);
// Encodes values[i] as column columns[i], for i < values.size() (a prefix).
Result<std::string> EncodeKey(const TableDef& def, const std::vector<uint32_t>& columns,
                              const Row& values);
// The key of a canonical row in index `index`.
std::string RowKey(const TableDef& def, uint32_t index, const Row& row);
// The encoded values of secondary index `index`'s own columns (no primary
// key) in a canonical row: a unique index's prefix.
std::string OwnColumnsKey(const TableDef& def, uint32_t index, const Row& row);
// Whether two canonical rows have the same key in index `index`: the same
// values in its columns and the primary key's (a canonical value has one
// encoding), without encoding either.
bool SameRowKey(const TableDef& def, uint32_t index, const Row& a, const Row& b);
// True if any of the index's own columns is NULL in the row (unique checks
// skip such rows).
bool KeyHasNull(const TableDef& def, uint32_t index, const Row& row);
// The length of the leading `parts` parts of an encoded key; *has_null (if
// given) says whether one of them is NULL.
Result<size_t> KeyPrefixLength(const TableDef& def, const std::vector<uint32_t>& columns,
                               std::string_view key, size_t parts, bool* has_null = nullptr);
// KeyPrefixLength that also stores each part's value in (*out)[column]
// (out: a row of the table's width) when out is given.
Result<size_t> DecodeKeyParts(const TableDef& def, const std::vector<uint32_t>& columns,
                              std::string_view key, size_t parts, bool* has_null, Row* out);

// The first key after every key that starts with `prefix` (nullopt: none,
// the prefix is all 0xff bytes).
std::optional<std::string> KeySuccessor(std::string prefix);

std::string EncodeRow(const TableDef& def, const Row& row);
Result<Row> DecodeRow(const TableDef& def, std::string_view bytes);

// An encoded row read in place: Parse checks it as DecodeRow does and notes
// where each column lies, without copying; the bytes must outlive the view.
// Reused from row to row, it allocates only when a table has more columns.
class RowView {
 public:
  Status Parse(const TableDef& def, std::string_view bytes);
  // Column i of the parsed row; a string is a view of the bytes.
  ValueView column(const TableDef& def, uint32_t i) const;
  Row Decode(const TableDef& def) const;

 private:
  static constexpr uint32_t kNull = UINT32_MAX;
  struct Span {
    uint32_t off, len;  // len kNull: NULL
  };
  std::string_view bytes_;
  std::vector<Span> spans_;
};

}  // namespace subito::engine
