// Translates one open MariaDB table's records and key tuples into Subito
// rows and key prefixes, and back (see table_layout.h for the mapping).
// One per handler: it owns scratch buffers, so it is not shared.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "subito/database.h"
#include "table_layout.h"

struct TABLE;
struct st_key_part_info;
typedef struct st_key_part_info KEY_PART_INFO;

namespace subito::mariadb {

// The primary key part (its number in the primary key) that is extended
// part `n` of `key` (0: the first part past the key's own). The server
// extends a key by the primary key parts it lacks, in the primary key's
// order (KEY::ext_key_part_map); the engine's entry ends with every primary
// key column, so that part is engine column own + j of the entry.
uint32_t PrimaryPartOfExtended(const KEY& key, uint32_t n);

class RowMapper {
 public:
  RowMapper(TABLE* table, const TableLayout* layout);

  // Every column of the engine row for `record` except __row_id.
  void ToRow(const unsigned char* record, Row* row);
  // Fills `record` from the engine row. Blob fields point into *storage (a
  // copy), or into `row` itself if storage is null; either must outlive the
  // record's use. Corruption if __record is damaged.
  Status FromRow(const Row& row, unsigned char* record, std::string* storage);
  // The same from the packed record bytes (the row's __record column); with
  // storage null, blob fields point into `bytes`. Only the fields before
  // field number `fields` are filled (the packed bytes hold no offsets:
  // the fields before the last one wanted are unpacked anyway); the others
  // keep what `record` held.
  Status FromRecord(std::string_view bytes, unsigned char* record, std::string* storage,
                    unsigned fields = ~0u);

  // The engine values of the first `parts` parts of MariaDB key `key`, from
  // a key tuple in the server's key format; parts past the key's own are
  // its extended parts (primary key columns, KEY::ext_key_part_map).
  void KeyPrefix(uint32_t key, const unsigned char* tuple, uint32_t parts, Row* prefix);
  // The engine values of every part of `key` for `record`.
  void KeyOfRecord(uint32_t key, const unsigned char* record, Row* values);

  // Index-only reads (keyread). Whether every part of `key` (a secondary
  // key) and of the primary key can be given back from its sort image: a
  // whole integer column that is stored (sort_string is then the value
  // big-endian, its sign bit flipped if signed). Collated and prefix parts
  // cannot.
  bool ImagesReversible(uint32_t key) const;
  // Fills those fields of `record` from the images in an entry of the
  // engine index of `key` (Cursor::SetKeysOnly); Corruption if an image is
  // not of its column's length.
  Status FromImages(uint32_t key, const Cursor& entry, unsigned char* record) const;

  // position(): the primary key's values (KeyOfRecord), fixed length.
  void RefOf(const Row& key, unsigned char* ref) const;
  // The engine primary key for a ref.
  void KeyOfRef(const unsigned char* ref, Row* key) const;

 private:
  void TupleToValues(uint32_t key, const unsigned char* tuple, uint32_t parts, Row* out);
  std::string Image(uint32_t key, uint32_t part, const unsigned char* data);
  std::string BlobImage(uint32_t key, uint32_t part, const unsigned char* data);

  TABLE* table_;
  const TableLayout* layout_;
  std::vector<unsigned char> scratch_record_;
  std::vector<unsigned char> tuple_;
  std::string weights_;  // StoreWeightLength's scratch
  Row key_values_;       // ToRow's scratch: one key's values at a time
};

}  // namespace subito::mariadb
