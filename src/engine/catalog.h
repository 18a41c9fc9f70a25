// The catalog: which tables and indexes exist, their schemas and the space
// (page file) of each index. One file, `<dir>/catalog`, rewritten whole on
// every DDL: written to `catalog.tmp`, synced, renamed over the old one, and
// the directory synced, so a crash leaves the old or the new catalog.
//
// Format version 1, little-endian:
//   [0, 8)    magic "SUBITOCA"
//   [8, 12)   format version (1)
//   [12, 16)  body length
//   [16, 20)  CRC32C of the body
//   [20, ..)  body: u32 page_size, u32 next_space_id, u32 next_table_id,
//             u8 in_use, u32 table count, then per table: u32 id, u8 state, str name,
//             str data_dir, i32 auto_increment_column, u32 column count,
//             columns (str name, u8 type, u8 width, u8 nullable,
//             u32 max_length), u32 index count (primary first), indexes
//             (str name, u8 unique, u8 state, u32 space_id, u32 column
//             count, u32 columns...). str: u32 length + bytes.
//
// Invariants:
//  K1. Space ids are never reused: next_space_id is above every id the
//      catalog ever named. A space id below it that no live index owns
//      belongs to a dropped index; redo and undo for it are skipped.
//  K2. DDL that creates files first records them (state kCreating) and then
//      makes them live; DDL that drops records kDropping and then removes
//      the files. Open finishes either kind: kCreating and kDropping
//      entries lose their files and leave the catalog.
//  K3. in_use is 1 from the end of a successful Open to a clean Close. A
//      database in use whose PM tier has no log lost its redo log (a
//      wiped /dev/shm): Open refuses it rather than lose commits silently.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "subito/database.h"
#include "util/file_io.h"

namespace subito::engine {

// Written: 4 (adds lsn_floor; 3 added each table's temporary flag and each
// column's descending flag; 2 each table's auto_increment_start). Read: 1
// to 4.
inline constexpr uint32_t kCatalogVersion = 4;

// kLoading (tables only): a BulkLoader is filling the table, or one ended
// without finishing; Open drops such a table (K4).
enum class DefState : uint8_t { kLive = 0, kCreating = 1, kDropping = 2, kLoading = 3 };

struct CatalogIndex {
  IndexDef def;  // the primary key: name PRIMARY, its columns, unique
  uint32_t space_id = 0;
  DefState state = DefState::kLive;
};

struct CatalogTable {
  uint32_t id = 0;
  DefState state = DefState::kLive;
  TableDef def;                       // def.indexes is unused here: see `indexes`
  std::vector<CatalogIndex> indexes;  // [0] primary
};

struct Catalog {
  uint32_t page_size = 0;
  uint32_t next_space_id = 1;
  uint32_t next_table_id = 1;
  bool in_use = false;
  uint64_t log_salt = 0;  // K5: the salt of this database's redo log (0: not yet bound)
  // K8: the log's end at the last clean shutdown; a log made later starts
  // there, above every LSN the pages carry (0: not recorded).
  uint64_t lsn_floor = 0;
  std::vector<CatalogTable> tables;
};

std::string CatalogPath(const std::string& dir);
// The page file of an index. Named by the table's id, not its name, so that
// renaming a table is one catalog rewrite.
std::string SpacePath(const std::string& dir, uint32_t table_id, const std::string& index,
                      uint32_t space_id);

Status WriteCatalog(FileSystem* fs, const std::string& dir, const Catalog& catalog);
// nullopt if there is no catalog; Corruption (naming the file) if it is damaged.
Result<std::optional<Catalog>> ReadCatalog(FileSystem* fs, const std::string& dir);

}  // namespace subito::engine
