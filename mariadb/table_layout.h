// How a MariaDB table maps onto a Subito table.
//
// Engine columns, in this order:
//   - one string column per key part of every MariaDB key (k<key>p<part>):
//     the server's own sort key of the part (Field::sort_string, the bytes
//     filesort compares), so that memcmp order in the engine is the server's
//     order in every collation; NULL parts are engine NULLs (they sort first
//     and never conflict in a unique index, as in MariaDB); the part of a
//     SPATIAL key holds the geometry's MBR image instead (unordered);
//   - __row_id (u64, auto-increment) when the table has no primary key;
//   - __record: the row, packed with Field::pack (RecordCodec).
// The engine's primary key is the MariaDB primary key's part columns (or
// __row_id); each other MariaDB key is a secondary index named like it.
//
// A key part's image has a fixed length per part (sort_string pads; see
// PartLayout for the suffix of NO PAD parts), so a primary key's parts
// concatenate into a fixed-length `ref` for position().
#pragma once

#include <string>
#include <vector>

#include "subito/database.h"

struct TABLE;
struct TABLE_SHARE;
struct st_key;
typedef struct st_key KEY;
class Field;

namespace subito::mariadb {

struct PartLayout {
  uint32_t column;     // engine column
  uint32_t image_len;  // bytes of the image (sort key and suffix)
  bool nullable;
  // A collated VARCHAR or TEXT part in a NO PAD collation: its sort key
  // pads the weights with zeros, so 'a' and 'a' followed by NUL (weight 0)
  // would tie where the collation orders the shorter first. The image ends
  // with the unpadded weights' length (2 bytes, big-endian), as a binary
  // string's sort key ends with its length.
  bool weight_length_suffix = false;
  // Such a part of a table created before the suffix (its catalog column is
  // two bytes shorter): images without it, which tie as described. Such a
  // table keeps them until it is rebuilt (ALTER TABLE ... FORCE).
  bool nopad_ties = false;
};

struct KeyLayout {
  uint32_t engine_index;  // 0: the engine's primary key
  // SPATIAL: one part, the geometry's MBR as the server's key image (four
  // doubles), searched by MBR relation (ha_subito::MbrSearch).
  bool spatial = false;
  std::vector<PartLayout> parts;
  // Columns of the engine's key for this index: the parts, then (for a
  // secondary index) the primary key's columns. They name one entry.
  std::vector<uint32_t> entry_columns;
};

class TableLayout {
 public:
  // Fails (NotSupported / InvalidArgument, with a message for the user) for
  // tables Subito cannot store.
  // page_size: the engine's, which bounds key length. stored: the table's
  // definition in the engine's catalog when it exists (an open), whose
  // column widths tell the image format it was created with.
  static Result<TableLayout> Build(const TABLE_SHARE* share, const std::string& name,
                                   uint32_t page_size, const TableDef* stored = nullptr);

  const TableDef& def() const { return def_; }
  bool hidden_pk() const { return hidden_pk_; }
  uint32_t row_id_column() const { return row_id_column_; }
  uint32_t record_column() const { return record_column_; }
  const KeyLayout& key(uint32_t k) const { return keys_[k]; }
  uint32_t ref_length() const { return ref_length_; }
  // MariaDB key number of an engine index (MAX_KEY for a hidden primary key).
  uint32_t mariadb_key(uint32_t engine_index) const;

 private:
  TableDef def_;
  std::vector<KeyLayout> keys_;  // by MariaDB key number
  bool hidden_pk_ = false;
  uint32_t row_id_column_ = 0, record_column_ = 0, ref_length_ = 0;
};

}  // namespace subito::mariadb
