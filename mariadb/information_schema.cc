// INFORMATION_SCHEMA tables of per-table I/O (docs/table-io.md):
//   SUBITO_TABLE_IO           counters per table and index since the start
//                             or the last FLUSH SUBITO_TABLE_IO
//   SUBITO_FILES              each index's page file: where, how big, growth
//   SUBITO_PLACEMENT_ADVICE   each table's class and where its files belong
//                             (include/subito/placement.h)
// Only translation lives here: the counters and the advice are the engine's.
// As InnoDB's INFORMATION_SCHEMA tables, they need the PROCESS privilege
// (without it, reading one fails with ER_SPECIFIC_ACCESS_DENIED_ERROR).
#include <my_global.h>
#include <sql_class.h>
#include <sql_i_s.h>
#include <sql_parse.h>
#include <sql_plugin.h>
#include <sql_show.h>
#include <sql_table.h>

#include <string>
#include <vector>

#include "information_schema.h"
#include "partition_names.h"
#include "subito/database.h"
#include "subito/placement.h"
#include "subito_trx.h"

namespace Show {

ST_FIELD_INFO subito_table_io_fields[] = {
    Column("TABLE_SCHEMA", Varchar(NAME_CHAR_LEN), NOT_NULL),
    Column("TABLE_NAME", Varchar(NAME_CHAR_LEN), NOT_NULL),
    Column("INDEX_NAME", Varchar(NAME_CHAR_LEN), NOT_NULL),
    Column("SECONDS", Double(MY_INT64_NUM_DECIMAL_DIGITS), NOT_NULL),
    Column("ROWS_READ", ULonglong(), NOT_NULL),
    Column("ROWS_INSERTED", ULonglong(), NOT_NULL),
    Column("ROWS_UPDATED", ULonglong(), NOT_NULL),
    Column("ROWS_DELETED", ULonglong(), NOT_NULL),
    Column("BUFFER_HITS", ULonglong(), NOT_NULL),
    Column("BUFFER_MISSES", ULonglong(), NOT_NULL),
    Column("FILE_DIRECTORY", Varchar(FN_REFLEN), NOT_NULL),
    Column("PAGES_READ", ULonglong(), NOT_NULL),
    Column("PAGES_WRITTEN", ULonglong(), NOT_NULL),
    Column("FILE_BYTES_READ", ULonglong(), NOT_NULL),
    Column("FILE_BYTES_WRITTEN", ULonglong(), NOT_NULL),
    Column("DOUBLE_WRITE_DIRECTORY", Varchar(FN_REFLEN), NOT_NULL),
    Column("DOUBLE_WRITE_BYTES", ULonglong(), NOT_NULL),
    Column("PM_DIRECTORY", Varchar(FN_REFLEN), NOT_NULL),
    Column("REDO_BYTES", ULonglong(), NOT_NULL),
    Column("PPL_APPENDS", ULonglong(), NOT_NULL),
    Column("PPL_BYTES", ULonglong(), NOT_NULL),
    Column("PM_BYTES_WRITTEN", ULonglong(), NOT_NULL),
    CEnd()};

ST_FIELD_INFO subito_files_fields[] = {
    Column("TABLE_SCHEMA", Varchar(NAME_CHAR_LEN), NOT_NULL),
    Column("TABLE_NAME", Varchar(NAME_CHAR_LEN), NOT_NULL),
    Column("INDEX_NAME", Varchar(NAME_CHAR_LEN), NOT_NULL),
    Column("FILE_NAME", Varchar(FN_REFLEN), NOT_NULL),
    Column("DIRECTORY", Varchar(FN_REFLEN), NOT_NULL),
    Column("PAGES", ULonglong(), NOT_NULL),
    Column("SIZE_BYTES", ULonglong(), NOT_NULL),
    Column("GROWTH_BYTES", SLonglong(), NOT_NULL),
    Column("SECONDS", Double(MY_INT64_NUM_DECIMAL_DIGITS), NOT_NULL),
    Column("GROWTH_BYTES_PER_SECOND", Double(MY_INT64_NUM_DECIMAL_DIGITS), NOT_NULL),
    CEnd()};

ST_FIELD_INFO subito_advice_fields[] = {
    Column("TABLE_SCHEMA", Varchar(NAME_CHAR_LEN), NOT_NULL),
    Column("TABLE_NAME", Varchar(NAME_CHAR_LEN), NOT_NULL),
    Column("CLASS", Varchar(16), NOT_NULL),
    Column("ACTION", Varchar(32), NOT_NULL),
    Column("DIRECTORY", Varchar(FN_REFLEN), NOT_NULL),
    Column("ROWS_READ", ULonglong(), NOT_NULL),
    Column("ROWS_CHANGED", ULonglong(), NOT_NULL),
    Column("BYTES_READ", ULonglong(), NOT_NULL),
    Column("BYTES_WRITTEN", ULonglong(), NOT_NULL),
    Column("READ_SHARE", Double(MY_INT64_NUM_DECIMAL_DIGITS), NOT_NULL),
    Column("WRITE_SHARE", Double(MY_INT64_NUM_DECIMAL_DIGITS), NOT_NULL),
    Column("WRITE_RANK", ULonglong(), NOT_NULL),
    Column("GROWTH_BYTES", SLonglong(), NOT_NULL),
    Column("GROWTH_BYTES_PER_SECOND", Double(MY_INT64_NUM_DECIMAL_DIGITS), NOT_NULL),
    Column("SECONDS", Double(MY_INT64_NUM_DECIMAL_DIGITS), NOT_NULL),
    Column("RECOMMENDATION", Varchar(1024), NOT_NULL),
    CEnd()};

}  // namespace Show

namespace subito::mariadb {
namespace {

std::string Decoded(const std::string& file_name) {
  char buf[NAME_LEN * 4 + 1];
  const size_t n = filename_to_tablename(file_name.c_str(), buf, sizeof buf, true);
  return std::string(buf, n);
}

// "db/t" (the server's file-name encoding of each part) -> schema and
// table as SQL names; a partition's "db/t#P#p0" (and "#SP#s0") -> "t#P#p0",
// as InnoDB names them. False for names that are not a user's table or
// partition (the server's #sql- intermediates of ALTER TABLE, and #TMP#
// partitions being rebuilt).
bool SplitName(const std::string& engine_name, std::string* schema, std::string* table) {
  const size_t slash = engine_name.find('/');
  if (slash == std::string::npos) return false;
  const std::string t = engine_name.substr(slash + 1);
  if (t.rfind("#sql", 0) == 0) return false;
  if (IsPartitionBeingRebuilt(t)) return false;
  *schema = Decoded(engine_name.substr(0, slash));
  const size_t p = FindPartitionMark(t);
  if (p == std::string::npos) {
    *table = Decoded(t);
    return true;
  }
  const size_t sp = FindMark(t, "#SP#", "#sp#", p + 3);
  *table = Decoded(t.substr(0, p)) + "#P#" +
           Decoded(t.substr(p + 3, sp == std::string::npos ? std::string::npos : sp - p - 3));
  if (sp != std::string::npos) *table += "#SP#" + Decoded(t.substr(sp + 4));
  return true;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

void Store(Field* f, const std::string& s) {
  f->store(s.data(), s.size(), system_charset_info);
}

void Store(Field* f, uint64_t v) {
  f->store(static_cast<longlong>(v), true);
}

// The engine's tables the caller may see, with their SQL names.
struct Named {
  std::string schema, table;
  const TableStats* stats;
};

std::vector<Named> Visible(const std::vector<TableStats>& all) {
  std::vector<Named> out;
  for (const TableStats& t : all) {
    Named n{"", "", &t};
    if (SplitName(t.name, &n.schema, &n.table)) out.push_back(std::move(n));
  }
  return out;
}

// Holds the engine's plugin while a statement reads its counters, so that
// an UNINSTALL PLUGIN meanwhile closes the engine only after it.
class EnginePin {
 public:
  explicit EnginePin(THD* thd) : thd_(thd) {
    static const LEX_CSTRING kName = {STRING_WITH_LEN("SUBITO")};
    ref_ = plugin_lock_by_name(thd, &kName, MYSQL_STORAGE_ENGINE_PLUGIN);
  }
  ~EnginePin() {
    if (ref_ != nullptr) plugin_unlock(thd_, ref_);
  }
  EnginePin(const EnginePin&) = delete;
  EnginePin& operator=(const EnginePin&) = delete;
  // The engine, or null when it is not open (or being uninstalled).
  Database* db() const { return ref_ != nullptr ? engine() : nullptr; }

 private:
  THD* thd_;
  plugin_ref ref_;
};

// Without PROCESS the statement fails with the server's access error, as
// InnoDB's tables do.
bool MayRead(THD* thd) {
  return !check_global_access(thd, PROCESS_ACL);
}

}  // namespace

namespace {

int FillTableIo(THD* thd, TABLE_LIST* tables, COND*) {
  return Guard(thd, "SUBITO_TABLE_IO", [&]() -> int {
    EnginePin pin(thd);
    if (!MayRead(thd) || pin.db() == nullptr) return 0;
    const std::vector<TableStats> all = pin.db()->AllTableStats();
    const Options& o = pin.db()->options();
    const std::string dwb_dir = o.double_write_on_pm ? o.pm_dir : o.dir;
    TABLE* table = tables->table;
    Field** f = table->field;
    for (const Named& n : Visible(all)) {
      const TableStats& t = *n.stats;
      for (const IndexStats& ix : t.indexes) {
        Store(f[0], n.schema);
        Store(f[1], n.table);
        Store(f[2], ix.name);
        f[3]->store(t.seconds);
        Store(f[4], ix.rows_read);
        Store(f[5], t.rows_inserted);
        Store(f[6], t.rows_updated);
        Store(f[7], t.rows_deleted);
        Store(f[8], ix.buffer_hits);
        Store(f[9], ix.buffer_misses);
        Store(f[10], DirectoryOf(ix.path));
        Store(f[11], ix.file_pages_read);
        Store(f[12], ix.file_pages_written);
        Store(f[13], ix.file_bytes_read);
        Store(f[14], ix.file_bytes_written);
        Store(f[15], dwb_dir);
        Store(f[16], ix.double_write_bytes);
        Store(f[17], o.pm_dir);
        Store(f[18], ix.redo_bytes);
        Store(f[19], ix.ppl_appends);
        Store(f[20], ix.ppl_bytes);
        Store(f[21],
              ix.redo_bytes + ix.ppl_bytes + (o.double_write_on_pm ? ix.double_write_bytes : 0));
        if (schema_table_store_record(thd, table)) return 1;
      }
    }
    return 0;
  });
}

// FLUSH SUBITO_TABLE_IO (the server checked RELOAD).
int ResetTableIo() {
  THD* thd = current_thd;
  return Guard(thd, "FLUSH SUBITO_TABLE_IO", [&]() -> int {
    EnginePin pin(thd);
    if (pin.db() != nullptr) pin.db()->ResetIoStats();
    return 0;
  });
}

int FillFiles(THD* thd, TABLE_LIST* tables, COND*) {
  return Guard(thd, "SUBITO_FILES", [&]() -> int {
    EnginePin pin(thd);
    if (!MayRead(thd) || pin.db() == nullptr) return 0;
    const std::vector<TableStats> all = pin.db()->AllTableStats();
    TABLE* table = tables->table;
    Field** f = table->field;
    for (const Named& n : Visible(all)) {
      const TableStats& t = *n.stats;
      for (const IndexStats& ix : t.indexes) {
        const int64_t growth = GrowthBytes(ix, t.page_size);
        Store(f[0], n.schema);
        Store(f[1], n.table);
        Store(f[2], ix.name);
        Store(f[3], ix.path);
        Store(f[4], DirectoryOf(ix.path));
        Store(f[5], ix.pages);
        Store(f[6], ix.pages * t.page_size);
        f[7]->store(static_cast<longlong>(growth), false);
        f[8]->store(t.seconds);
        f[9]->store(t.seconds > 0 ? static_cast<double>(growth) / t.seconds : 0.0);
        if (schema_table_store_record(thd, table)) return 1;
      }
    }
    return 0;
  });
}

int FillAdvice(THD* thd, TABLE_LIST* tables, COND*) {
  return Guard(thd, "SUBITO_PLACEMENT_ADVICE", [&]() -> int {
    EnginePin pin(thd);
    if (!MayRead(thd) || pin.db() == nullptr) return 0;
    const std::vector<TableStats> all = pin.db()->AllTableStats();
    const std::vector<Named> named = Visible(all);
    std::vector<TableStats> chosen;
    for (const Named& n : named) chosen.push_back(*n.stats);
    const std::vector<PlacementAdvice> advice = AdvisePlacement(chosen);
    TABLE* table = tables->table;
    Field** f = table->field;
    for (size_t i = 0; i < advice.size(); ++i) {
      const PlacementAdvice& a = advice[i];
      Store(f[0], named[i].schema);
      Store(f[1], named[i].table);
      Store(f[2], std::string(TableClassName(a.kind)));
      Store(f[3], a.action);
      Store(f[4], chosen[i].dir);
      Store(f[5], a.rows_read);
      Store(f[6], a.rows_changed);
      Store(f[7], a.bytes_read);
      Store(f[8], a.bytes_written);
      f[9]->store(a.read_share);
      f[10]->store(a.write_share);
      Store(f[11], uint64_t{a.write_rank});
      f[12]->store(static_cast<longlong>(a.growth_bytes), false);
      f[13]->store(a.growth_bytes_per_second);
      f[14]->store(a.seconds);
      Store(f[15], a.reason);
      if (schema_table_store_record(thd, table)) return 1;
    }
    return 0;
  });
}

}  // namespace

int InitTableIoSchema(void* p) {
  auto* s = static_cast<ST_SCHEMA_TABLE*>(p);
  s->fields_info = ::Show::subito_table_io_fields;
  s->fill_table = FillTableIo;
  s->reset_table = ResetTableIo;
  return 0;
}

int InitFilesSchema(void* p) {
  auto* s = static_cast<ST_SCHEMA_TABLE*>(p);
  s->fields_info = ::Show::subito_files_fields;
  s->fill_table = FillFiles;
  return 0;
}

int InitPlacementSchema(void* p) {
  auto* s = static_cast<ST_SCHEMA_TABLE*>(p);
  s->fields_info = ::Show::subito_advice_fields;
  s->fill_table = FillAdvice;
  return 0;
}

}  // namespace subito::mariadb
