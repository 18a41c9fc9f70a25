#include "ha_subito.h"

#include <algorithm>

#include <my_global.h>
// clang-format off: the server's headers depend on this order
#include "create_options.h"
#include "key.h"
#include "log.h"
#include "sql_class.h"
#include "sql_lex.h"
#include "sql_parse.h"
#include "sql_table.h"
// clang-format on

#include <strings.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "partition_names.h"
#include "subito_trx.h"

using subito::Row;
using subito::SeekOp;
using subito::Status;
using subito::mariadb::Guard;
using subito::mariadb::GuardOr;
using subito::mariadb::SubitoShare;
using subito::mariadb::TableLayout;

ha_create_table_option subito_table_options[] = {
    HA_TOPTION_STRING("PAGE_DIRECTORY", page_directory), HA_TOPTION_END};

const char* ha_subito_exts[] = {NullS};

namespace {

// The engine's name for a MariaDB table: "./db/t" -> "db/t". A TEMPORARY
// table's path is <tmpdir>/#sql-temptable-<pid>-<thread>-<n>, unique in the
// server by itself; its name is that last part, so that the length of
// tmpdir never counts against the engine's name limits.
std::string EngineName(const char* path) {
  std::string s(path);
  if (s.rfind("./", 0) == 0) return s.erase(0, 2);
  const size_t slash = s.rfind('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

// Table files go only where the server lets statements write files: under
// secure_file_priv when it is set (as for SELECT ... INTO OUTFILE), wherever
// the server's own DATA DIRECTORY rules allow otherwise; checked on the
// nearest directory that exists. Reports the error when not.
bool MayPlaceFilesIn(const std::string& dir) {
  std::string probe = dir;
  while (probe.size() > 1 && access(probe.c_str(), F_OK) != 0) {
    const size_t up = probe.rfind('/');
    probe.erase(up == 0 || up == std::string::npos ? 1 : up);
  }
  probe += "/";
  if (is_secure_file_path(probe.data())) return true;
  my_error(ER_OPTION_PREVENTS_STATEMENT, MYF(0), "--secure-file-priv");
  return false;
}

// Whether this ALTER TABLE names the table option itself (its copy also
// carries the old table's options). Only ALTER TABLE's parse fills
// lex->create_info.option_list: other statements that rebuild a table
// (OPTIMIZE, TRUNCATE, CREATE INDEX) leave the previous statement's there.
bool AlterNames(THD* thd, const char* option) {
  if (thd_sql_command(thd) != SQLCOM_ALTER_TABLE) return false;
  for (const engine_option_value* o = thd->lex->create_info.option_list; o; o = o->next) {
    if (o->name.length == strlen(option) && !strncasecmp(o->name.str, option, o->name.length)) {
      return true;
    }
  }
  return false;
}

// The part of an engine name after the table's: "#P#p0" for a partition
// ("#P#p0#TMP#": one being rebuilt), "" for a table.
std::string PartitionSuffix(const std::string& name) {
  const size_t at = subito::mariadb::FindPartitionMark(name);
  if (at == std::string::npos) return "";
  std::string suffix = name.substr(at);
  if (subito::mariadb::IsPartitionBeingRebuilt(suffix)) {
    suffix.resize(suffix.size() - subito::mariadb::kRebuildMark.size());
  }
  return suffix;
}

// Whether a rename puts a rebuilt copy in a table's place: an ALTER's copy
// ("db/#sql-alter-...") or a partition rebuilt by ADD, REORGANIZE or
// COALESCE PARTITION ("db/t#P#p0#TMP#"). Not the server's other renames
// (#sql-backup-... back to the table when an ALTER fails, EXCHANGE
// PARTITION), which move a table that keeps its own counts.
bool IsRebuiltCopy(const std::string& from) {
  const size_t slash = from.rfind('/');
  const std::string base = from.substr(slash == std::string::npos ? 0 : slash + 1);
  return base.rfind("#sql-alter-", 0) == 0 || subito::mariadb::IsPartitionBeingRebuilt(base);
}

// The engine's table this statement rebuilds (ALTER TABLE t, OPTIMIZE TABLE
// t), or the same partition of it when `name` is a partition's.
const subito::Table* RebuiltTable(THD* thd, const subito::Database* db, const std::string& name) {
  const TABLE_LIST* tl = thd->lex->query_tables;
  if (tl == nullptr) return nullptr;
  char path[FN_REFLEN + 1];
  build_table_filename(path, sizeof path - 1, tl->db.str, tl->table_name.str, "", 0);
  const std::string base = EngineName(path);
  const std::string suffix = PartitionSuffix(name);
  if (const subito::Table* t = db->FindTable(base + suffix)) return t;
  if (suffix.empty()) return nullptr;
  // A partition new in this statement (ADD, REORGANIZE PARTITION): where
  // the table's other partitions are.
  for (const std::string& other : db->TableNames()) {
    if (other.size() > base.size() + 3 && other.compare(0, base.size(), base) == 0 &&
        !PartitionSuffix(other).empty() && !IsRebuiltCopy(other)) {
      return db->FindTable(other);
    }
  }
  return nullptr;
}

bool IsLockingRead(thr_lock_type t) {
  return t >= TL_FIRST_WRITE || t == TL_READ_WITH_SHARED_LOCKS || t == TL_READ_SKIP_LOCKED;
}

// A value of the auto-increment column as a counter position, or 0 for
// NULL and values below 1 (which never move the counter, as in InnoDB).
ulonglong CounterValue(const Field* f, longlong v) {
  return v > 0 || (f->flags & UNSIGNED_FLAG) ? static_cast<ulonglong>(v) : 0;
}

// How a locking read of this lock type locks.
subito::ReadMode LockingMode(thr_lock_type t) {
  switch (t) {
    case TL_READ_WITH_SHARED_LOCKS:
      return subito::ReadMode::kShared;
    case TL_READ_SKIP_LOCKED:
      return subito::ReadMode::kSharedSkipLocked;
    case TL_WRITE_SKIP_LOCKED:
      return subito::ReadMode::kExclusiveSkipLocked;
    default:
      return subito::ReadMode::kExclusive;
  }
}

// Statements that write and may read other tables on the way (INSERT ...
// SELECT, UPDATE ... (SELECT), CREATE ... SELECT, SET @v = (SELECT ...)).
// ALTER TABLE's and OPTIMIZE's copies are not among them: their metadata
// lock keeps writers out.
bool ReadsForAWrite(int cmd) {
  switch (cmd) {
    case SQLCOM_INSERT:
    case SQLCOM_INSERT_SELECT:
    case SQLCOM_REPLACE:
    case SQLCOM_REPLACE_SELECT:
    case SQLCOM_UPDATE:
    case SQLCOM_UPDATE_MULTI:
    case SQLCOM_DELETE:
    case SQLCOM_DELETE_MULTI:
    case SQLCOM_CREATE_TABLE:
    case SQLCOM_LOAD:
    case SQLCOM_SET_OPTION:
    case SQLCOM_DO:
      return true;
    default:
      return false;
  }
}

// How a statement reads a table it locked with `t`, by InnoDB's store_lock
// and start_stmt rules: locking reads as asked; at SERIALIZABLE, plain
// reads share-lock except autocommit SELECTs; at REPEATABLE READ, a table
// that a writing statement only reads is share-locked too (and so its
// ranges, lock_manager.h L6), so that the statement replays alike from a
// statement-based binary log. Everything else is a consistent read.
subito::ReadMode ReadModeFor(THD* thd, const subito::mariadb::Trx& trx, thr_lock_type t) {
  if (IsLockingRead(t)) return LockingMode(t);
  const int cmd = thd_sql_command(thd);
  if (trx.serializable &&
      (cmd != SQLCOM_SELECT || thd_test_options(thd, OPTION_NOT_AUTOCOMMIT | OPTION_BEGIN))) {
    return subito::ReadMode::kShared;
  }
  if (thd_tx_isolation(thd) <= ISO_READ_COMMITTED) return subito::ReadMode::kSnapshot;
  // A SELECT that calls a function that writes, logged as a statement.
  if (t == TL_READ_NO_INSERT && cmd == SQLCOM_SELECT) return subito::ReadMode::kShared;
  if ((t == TL_READ || t == TL_READ_NO_INSERT) && ReadsForAWrite(cmd)) {
    return subito::ReadMode::kShared;
  }
  return subito::ReadMode::kSnapshot;
}

// Key parts a keypart_map names (HA_WHOLE_KEY: all of them).
uint PartsOf(const KEY& key, key_part_map map) {
  return std::min<uint>(my_count_bits(map), key.user_defined_key_parts);
}

}  // namespace

ha_subito::ha_subito(handlerton* hton, TABLE_SHARE* share) : handler(hton, share) {}

ha_subito::~ha_subito() {
  if (bulk_txn_) (void)bulk_txn_->Rollback();
}

ulonglong ha_subito::table_flags() const {
  // Statement-based binary logging at REPEATABLE READ and above, as InnoDB:
  // range locks make a statement's locking reads repeatable in commit
  // order (docs/architecture.md); READ COMMITTED takes none. Not for a
  // table with an AUTO_INCREMENT column: a bulk insert's values are not
  // kept consecutive against concurrent inserts (no AUTO-INC table lock),
  // which a statement-based log needs (MIXED logs such rows as rows);
  // temporary tables are private to their connection.
  const THD* thd = ha_thd();
  const bool autoinc = table_share && table_share->found_next_number_field &&
                       table_share->tmp_table == NO_TMP_TABLE;  // a temporary one has no rival
  const ulonglong stmt =
      thd && !autoinc && thd_tx_isolation(thd) > ISO_READ_COMMITTED ? HA_BINLOG_STMT_CAPABLE : 0;
  // HA_CAN_ONLINE_BACKUPS: writes go on through BACKUP STAGE FLUSH and
  // BLOCK_DDL, as InnoDB's, since Subito's files stay as they are from
  // BACKUP STAGE START (Database::PauseFileWrites).
  return stmt | HA_CAN_ONLINE_BACKUPS | HA_REC_NOT_IN_SEQ | HA_NULL_IN_KEY | HA_CAN_INDEX_BLOBS |
         HA_PRIMARY_KEY_IN_READ_INDEX | HA_PRIMARY_KEY_REQUIRED_FOR_POSITION |
         HA_PRIMARY_KEY_REQUIRED_FOR_DELETE | HA_TABLE_SCAN_ON_INDEX | HA_CAN_SQL_HANDLER |
         HA_BINLOG_ROW_CAPABLE | HA_REQUIRES_KEY_COLUMNS_FOR_DELETE | HA_CAN_SKIP_LOCKED |
         HA_CAN_GEOMETRY | HA_CAN_RTREEKEYS | HA_CAN_VIRTUAL_COLUMNS;
}

const char* ha_subito::index_type(uint key) {
  return table_share && (table_share->key_info[key].flags & HA_SPATIAL) ? "SPATIAL" : "BTREE";
}

ulong ha_subito::index_flags(uint inx, uint, bool) const {
  if (table_share && (table_share->key_info[inx].flags & HA_SPATIAL)) {
    return HA_READ_NEXT | HA_READ_RANGE | HA_KEY_SCAN_NOT_ROR;  // as InnoDB's, less ORDER
  }
  ulong f = HA_READ_NEXT | HA_READ_PREV | HA_READ_ORDER | HA_READ_RANGE | HA_KEYREAD_ONLY;
  if (table_share && inx == table_share->primary_key) f |= HA_CLUSTERED_INDEX;
  return f;
}

SubitoShare* ha_subito::GetShare() {
  lock_shared_ha_data();
  auto* s = static_cast<SubitoShare*>(get_ha_share_ptr());
  if (s == nullptr) {
    s = new SubitoShare;
    set_ha_share_ptr(s);
  }
  unlock_shared_ha_data();
  return s;
}

subito::Transaction* ha_subito::Txn() {
  if (bulk_txn_) return bulk_txn_.get();
  subito::mariadb::Trx* trx = subito::mariadb::GetTrx(ha_thd());
  return trx->txn.get();
}

int ha_subito::Error(const Status& st) {
  int err = subito::mariadb::ToHaError(ha_thd(), st);
  if (err == HA_ERR_FOUND_DUPP_KEY) {
    // The engine names the index: "duplicate entry for unique index <name>"
    // or "duplicate primary key in <table>".
    dup_key_ = static_cast<int>(table->s->primary_key);
    const std::string& m = st.message();
    const std::string tag = "unique index ";
    if (size_t at = m.find(tag); at != std::string::npos) {
      const std::string name = m.substr(at + tag.size());
      for (uint k = 0; k < table->s->keys; ++k) {
        if (name.rfind(table->key_info[k].name.str, 0) == 0 &&
            (name.size() == table->key_info[k].name.length ||
             name[table->key_info[k].name.length] == ' ')) {
          dup_key_ = static_cast<int>(k);
        }
      }
    }
  }
  return err;
}

bool ha_subito::get_error_message(int error, String* buf) {
  if (error != HA_ERR_SUBITO_ENGINE) return false;
  const std::string& m = subito::mariadb::LastErrorMessage();
  buf->copy(m.data(), static_cast<uint32>(m.size()), system_charset_info);
  return false;
}

// ---- DDL ----

int ha_subito::create(const char* name, TABLE* form, HA_CREATE_INFO* info) {
  return Guard(ha_thd(), "create", [&]() -> int {
    subito::Database* db = subito::mariadb::engine();
    THD* thd = ha_thd();
    for (const Key& key : thd->lex->alter_info.key_list) {
      if (key.type == Key::FOREIGN_KEY) {
        my_printf_error(ER_ILLEGAL_HA_CREATE_OPTION,
                        "Subito does not support FOREIGN KEY constraints (constraint on %s)",
                        MYF(0), form->s->table_name.str);
        return HA_WRONG_CREATE_OPTION;
      }
    }
    subito::Result<TableLayout> layout =
        TableLayout::Build(form->s, EngineName(name), subito::mariadb::PageSize());
    if (!layout.ok()) {
      my_printf_error(ER_ILLEGAL_HA_CREATE_OPTION, "%s", MYF(0), layout.status().message().c_str());
      return HA_WRONG_CREATE_OPTION;
    }
    subito::TableDef def = layout->def();
    // AUTO_INCREMENT=N, also what an ALTER's copy carries over from the old
    // table (its info(HA_STATUS_AUTO)).
    if (form->s->found_next_number_field) def.auto_increment_start = info->auto_increment_value;
    if (info->tmp_table()) {
      // Private to the connection by the server's naming; the engine drops it
      // at its next start if the server did not (a crash).
      if (form->s->option_struct && form->s->option_struct->page_directory &&
          *form->s->option_struct->page_directory) {
        push_warning_printf(thd, Sql_condition::WARN_LEVEL_WARN, WARN_OPTION_IGNORED,
                            ER_THD(thd, WARN_OPTION_IGNORED), "PAGE_DIRECTORY");
      }
      def.temporary = true;
      def.data_dir = subito::mariadb::TemporaryDir();
    } else if (const char* page_dir =
                   form->s->option_struct ? form->s->option_struct->page_directory : nullptr) {
      std::string dir(page_dir);
      while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
      if (!dir.empty() && dir[0] != '/') {
        my_error(ER_WRONG_VALUE, MYF(0), "PAGE_DIRECTORY", page_dir);
        return HA_WRONG_CREATE_OPTION;
      }
      // Carried over from the table this statement rebuilds (a copying
      // ALTER, OPTIMIZE): its files stay where they are. Otherwise (given
      // here, or carried from a table that was not Subito's) it is checked.
      const subito::Table* old =
          thd_sql_command(thd) == SQLCOM_CREATE_TABLE || AlterNames(thd, "PAGE_DIRECTORY")
              ? nullptr
              : RebuiltTable(thd, db, EngineName(name));
      if (old != nullptr) {
        dir = old->def().data_dir;
      } else if (!dir.empty() && (thd->variables.sql_mode & MODE_NO_DIR_IN_CREATE)) {
        // As the server does with DATA DIRECTORY (a replica's setting).
        push_warning_printf(thd, Sql_condition::WARN_LEVEL_WARN, WARN_OPTION_IGNORED,
                            ER_THD(thd, WARN_OPTION_IGNORED), "PAGE_DIRECTORY");
        dir.clear();
      } else if (!dir.empty() && (error_if_data_home_dir((dir + "/t").c_str(), "PAGE_DIRECTORY") ||
                                  !MayPlaceFilesIn(dir))) {
        return HA_WRONG_CREATE_OPTION;
      }
      def.data_dir = dir;
    } else if (info->data_file_name) {
      // The server appends the table's name (MyISAM's layout); Subito keeps
      // the directory and names files itself, as InnoDB does.
      std::string dir(info->data_file_name);
      const size_t slash = dir.rfind('/');
      if (slash != std::string::npos) dir.erase(slash == 0 ? 1 : slash);
      // Checked when a table is created (a copying ALTER keeps the
      // directory; the server drops a DATA DIRECTORY given to ALTER TABLE).
      if (thd_sql_command(thd) == SQLCOM_CREATE_TABLE && !MayPlaceFilesIn(dir)) {
        return HA_WRONG_CREATE_OPTION;
      }
      def.data_dir = dir;
    }
    if (thd_sql_command(thd) == SQLCOM_TRUNCATE) {
      // TRUNCATE recreates the table (HTON_CAN_RECREATE): the old one goes,
      // and the new one stays where it was (the server passes no directory).
      if (subito::Table* old = db->FindTable(def.name)) {
        if (!info->data_file_name) def.data_dir = old->def().data_dir;
        Status st = db->DropTable(def.name);
        if (!st.ok()) return Error(st);
      }
    }
    subito::Result<subito::Table*> t = db->CreateTable(def);
    if (!t.ok()) {
      if (t.status().IsAlreadyExists()) return HA_ERR_TABLE_EXIST;
      my_printf_error(ER_CANT_CREATE_TABLE, "Subito cannot create %s: %s", MYF(0), name,
                      t.status().message().c_str());
      return HA_WRONG_CREATE_OPTION;
    }
    return 0;
  });
}

int ha_subito::delete_table(const char* name) {
  return Guard(ha_thd(), "delete_table", [&]() -> int {
    Status st = subito::mariadb::engine()->DropTable(EngineName(name));
    if (st.IsNotFound()) return ENOENT;
    return st.ok() ? 0 : Error(st);
  });
}

int ha_subito::rename_table(const char* from, const char* to) {
  return Guard(ha_thd(), "rename_table", [&]() -> int {
    subito::Database* db = subito::mariadb::engine();
    const std::string old_name = EngineName(from), new_name = EngineName(to);
    Status st = db->RenameTable(old_name, new_name);
    if (st.IsNotFound()) return ENOENT;
    if (st.IsAlreadyExists()) return HA_ERR_TABLE_EXIST;
    if (!st.ok()) return Error(st);
    // An ALTER's copy takes the table's place: its counters start there,
    // not with the rows the copy inserted (SUBITO_TABLE_IO).
    if (IsRebuiltCopy(old_name)) {
      if (subito::Table* t = db->FindTable(new_name)) t->ResetIoStats();
    }
    return 0;
  });
}

int ha_subito::truncate() {
  return Guard(ha_thd(), "truncate", [&]() -> int {
    subito::Database* db = subito::mariadb::engine();
    const subito::TableDef def = EngineTable()->def();
    cursor_.reset();
    if (Status st = db->DropTable(def.name); !st.ok()) return Error(st);
    subito::Result<subito::Table*> t = db->CreateTable(def);
    // On failure the share keeps the dropped table, which refuses every use.
    if (!t.ok()) return Error(t.status());
    std::lock_guard<std::mutex> g(share_->mu);
    share_->table = *t;
    share_->next_auto_inc = 0;
    share_->rec_per_key_valid = false;
    return 0;
  });
}

int ha_subito::open(const char* name, int, uint) {
  return Guard(ha_thd(), "open", [&]() -> int {
    if (subito::mariadb::engine() == nullptr) return HA_ERR_INTERNAL_ERROR;
    share_ = GetShare();
    {
      std::lock_guard<std::mutex> g(share_->mu);
      if (int err = OpenShare(name)) return err;
    }
    mapper_ = std::make_unique<subito::mariadb::RowMapper>(table, &*share_->layout);
    ref_length = share_->layout->ref_length();
    // A table scan walks the primary key (as InnoDB's): the server then reads
    // all rows first when a statement changes the key it scans, instead of
    // meeting moved rows again.
    key_used_on_scan = table->s->primary_key;
    info(HA_STATUS_VARIABLE | HA_STATUS_CONST);
    return 0;
  });
}

int ha_subito::OpenShare(const char* name) {
  share_->table = subito::mariadb::engine()->FindTable(EngineName(name));
  if (share_->table == nullptr) return HA_ERR_NO_SUCH_TABLE;
  if (!share_->layout) {
    subito::Result<TableLayout> layout =
        TableLayout::Build(table->s, EngineName(name), subito::mariadb::PageSize());
    if (!layout.ok()) {
      sql_print_error("Subito: cannot open %s: %s", name, layout.status().ToString().c_str());
      return HA_ERR_UNSUPPORTED;
    }
    if (layout->def().columns.size() != share_->table->def().columns.size()) {
      sql_print_error("Subito: %s does not match the engine's catalog (%zu columns, catalog %zu)",
                      name, layout->def().columns.size(), share_->table->def().columns.size());
      return HA_ERR_TABLE_DEF_CHANGED;
    }
    share_->layout.emplace(std::move(*layout));
  }
  return 0;
}

int ha_subito::close() {
  return Guard(ha_thd(), "close", [&]() -> int {
    cursor_.reset();
    mapper_.reset();
    loader_.reset();  // unfinished: the table stays only to be dropped
    return 0;
  });
}

void ha_subito::update_create_info(HA_CREATE_INFO* create_info) {
  (void)Guard(ha_thd(), "update_create_info", [&]() -> int {
    // SHOW CREATE TABLE shows DATA DIRECTORY and the next AUTO_INCREMENT.
    const std::string& dir = EngineTable()->def().data_dir;
    if (!dir.empty() && !EngineTable()->def().temporary &&
        !(create_info->used_fields & HA_CREATE_USED_DATADIR)) {
      // In the server's form: the directory, then the table's name.
      const std::string path = dir + "/" + table->s->table_name.str;
      create_info->data_file_name = thd_strmake(ha_thd(), path.data(), path.size());
    }
    if (table->found_next_number_field && !(create_info->used_fields & HA_CREATE_USED_AUTO)) {
      info(HA_STATUS_AUTO);
      create_info->auto_increment_value = stats.auto_increment_value;
    }
    return 0;
  });
}

// ---- transactions ----

int ha_subito::external_lock(THD* thd, int lock_type) {
  return Guard(ha_thd(), "external_lock", [&]() -> int {
    subito::mariadb::Trx* trx = subito::mariadb::GetTrx(thd);
    if (lock_type == F_UNLCK) {
      cursor_.reset();
      if (trx->tables_in_statement > 0) --trx->tables_in_statement;
      return 0;
    }
    if (trx->tables_in_statement++ == 0 || !trx->txn) {
      if (int err = subito::mariadb::BeginStatement(thd, trx)) return err;
    }
    autoinc_rows_left_ = 0;
    stmt_reserved_end_ = 0;
    read_mode_ = ReadModeFor(thd, *trx, lock_type_);
    return 0;
  });
}

int ha_subito::start_stmt(THD* thd, thr_lock_type lock_type) {
  return Guard(ha_thd(), "start_stmt", [&]() -> int {
    lock_type_ = lock_type;
    subito::mariadb::Trx* trx = subito::mariadb::GetTrx(thd);
    autoinc_rows_left_ = 0;
    stmt_reserved_end_ = 0;
    // First: a statement that begins a transaction sets its isolation.
    if (int err = subito::mariadb::BeginStatement(thd, trx)) return err;
    read_mode_ = ReadModeFor(thd, *trx, lock_type);
    return 0;
  });
}

THR_LOCK_DATA** ha_subito::store_lock(THD*, THR_LOCK_DATA** to, enum thr_lock_type lock_type) {
  // Row locks and MDL do the work; no table locks.
  if (lock_type != TL_IGNORE) lock_type_ = lock_type;
  return to;
}

// ---- writes ----

// A row the engine cannot store is refused before ToRow copies its BLOBs:
// its stored image (every column, BLOB bytes included) is one value of at
// most 4 GB - 1 bytes.
int ha_subito::CheckRowSize(const uchar* record) {
  ulonglong bytes = table->s->reclength;
  for (uint i = 0; i < table->s->blob_fields; ++i) {
    const auto* f = static_cast<const Field_blob*>(table->field[table->s->blob_field[i]]);
    bytes += f->get_length(record + (f->ptr - table->record[0]));
  }
  constexpr ulonglong kMaxRow = 0xffffffffull - (64u << 10);
  if (bytes <= kMaxRow) return 0;
  my_printf_error(ER_TOO_BIG_ROWSIZE,
                  "Row size too large for Subito: %llu bytes; a row holds at most %llu bytes",
                  MYF(0), bytes, kMaxRow);
  return HA_ERR_TO_BIG_ROW;
}

int ha_subito::write_row(const uchar* buf) {
  return Guard(ha_thd(), "write_row", [&]() -> int {
    if (int err = CheckRowSize(buf)) return err;
    subito::Table* t = EngineTable();
    const bool counted = table->next_number_field && buf == table->record[0];
    if (counted) {
      if (int err = update_auto_increment()) return err;
    }
    Row row;
    mapper_->ToRow(buf, &row);
    if (share_->layout->hidden_pk()) {
      subito::Result<uint64_t> id = t->NextAutoIncrement();
      if (!id.ok()) return Error(id.status());
      row[share_->layout->row_id_column()] = *id;
    }
    int err = 0;
    if (bulk_) {
      err = BulkWrite(row);
    } else if (txn_loader_) {
      if (Status st = txn_loader_->Add(row); !st.ok()) err = Error(st);
    } else if (subito::Transaction* txn = Txn(); txn == nullptr) {
      return HA_ERR_INTERNAL_ERROR;
    } else if (Status st = txn->Insert(t, row); !st.ok()) {
      err = Error(st);
    }
    // An explicit value moves the counter once its row is in, and, as in
    // InnoDB, when REPLACE, INSERT ... SELECT or LOAD DATA with REPLACE or
    // IGNORE meets it as a duplicate. The table a copy fills reads its
    // counter from its rows when it is first used.
    if (counted && !bulk_ &&
        (err == 0 || (err == HA_ERR_FOUND_DUPP_KEY && DuplicateMovesCounter()))) {
      SawAutoIncrement(table->next_number_field, false);
    }
    if (counted && autoinc_rows_left_ > 0) --autoinc_rows_left_;
    return err;
  });
}

bool ha_subito::DuplicateMovesCounter() const {
  const THD* thd = ha_thd();
  switch (thd_sql_command(thd)) {
    case SQLCOM_REPLACE:
    case SQLCOM_INSERT_SELECT:
    case SQLCOM_REPLACE_SELECT:
      return true;
    case SQLCOM_LOAD:
      return thd->lex->duplicates != DUP_ERROR || thd->lex->ignore;
    default:
      return false;
  }
}

// The new table of a copy is filled by the engine's bulk loader when it can
// have it (the table is empty and unused), else by transactions.
int ha_subito::BulkWrite(const Row& row) {
  if (bulk_rows_ == 0 && !loader_ && !bulk_txn_) {
    auto loader = subito::mariadb::engine()->BeginBulkLoad(EngineTable());
    if (loader.ok()) loader_ = std::move(*loader);
  }
  if (loader_) {
    Status st = loader_->Add(row);
    if (!st.ok()) return Error(st);
    ++bulk_rows_;
    return 0;
  }
  if (!bulk_txn_) bulk_txn_ = subito::mariadb::engine()->Begin();
  Status st = bulk_txn_->Insert(EngineTable(), row);
  if (!st.ok()) return Error(st);
  if (++bulk_rows_ % 10000 == 0) {
    st = bulk_txn_->Commit();
    bulk_txn_.reset();
    if (!st.ok()) return Error(st);
  }
  return 0;
}

// A statement that inserts many rows (multi-row INSERT, INSERT ... SELECT,
// LOAD DATA) into an empty table with unique_checks=0 and
// foreign_key_checks=0, as mysqldump's output sets them, fills it through
// its transaction's bulk insert (Transaction::BulkInsert), as InnoDB does
// under the same settings: no row locks or undo per row, other sessions
// wait for the table until the transaction ends, a rollback empties it.
// Otherwise, and when the table does not qualify, rows go in one by one.
void ha_subito::start_bulk_insert(ha_rows, uint) {
  (void)Guard(ha_thd(), "start_bulk_insert", [&]() -> int {
    txn_loader_.reset();
    THD* thd = ha_thd();
    if (bulk_ || !thd_test_options(thd, OPTION_RELAXED_UNIQUE_CHECKS) ||
        !thd_test_options(thd, OPTION_NO_FOREIGN_KEY_CHECKS) || thd->lex->duplicates != DUP_ERROR) {
      return 0;
    }
    subito::Transaction* txn = Txn();
    if (txn == nullptr) return 0;
    auto loader = txn->BulkInsert(EngineTable());
    if (loader.ok()) txn_loader_ = std::move(*loader);
    return 0;  // not qualified (Busy) or failed: row by row, which reports any error
  });
}

int ha_subito::end_bulk_insert() {
  return Guard(ha_thd(), "end_bulk_insert", [&]() -> int {
    if (!txn_loader_) return 0;
    std::unique_ptr<subito::BulkLoader> loader = std::move(txn_loader_);
    Status st = loader->Finish();
    return st.ok() ? 0 : Error(st);
  });
}

int ha_subito::EndBulk(bool commit) {
  bulk_ = false;
  if (loader_) {
    std::unique_ptr<subito::BulkLoader> loader = std::move(loader_);
    if (!commit) return 0;  // the table is dropped next
    Status st = loader->Finish();
    return st.ok() ? 0 : Error(st);
  }
  if (!bulk_txn_) return 0;
  std::unique_ptr<subito::Transaction> txn = std::move(bulk_txn_);
  Status st = commit ? txn->Commit() : txn->Rollback();
  return st.ok() ? 0 : Error(st);
}

int ha_subito::update_row(const uchar* old_data, const uchar* new_data) {
  return Guard(ha_thd(), "update_row", [&]() -> int {
    if (int err = CheckRowSize(new_data)) return err;
    Row old_row, new_row;
    mapper_->ToRow(old_data, &old_row);
    mapper_->ToRow(new_data, &new_row);
    if (share_->layout->hidden_pk()) {
      const uint32_t c = share_->layout->row_id_column();
      old_row[c] = row_id_;
      new_row[c] = row_id_;
    }
    if (table->found_next_number_field && new_data == table->record[0]) {
      SawAutoIncrement(table->found_next_number_field, true);
    }
    // The server counts a row as changed when the two records' bytes differ;
    // like InnoDB, tell it when no stored value did.
    if (old_row == new_row) return HA_ERR_RECORD_IS_THE_SAME;
    subito::Transaction* txn = Txn();
    if (txn == nullptr) return HA_ERR_INTERNAL_ERROR;
    Status st = txn->Update(EngineTable(), old_row, new_row);
    return st.ok() ? 0 : Error(st);
  });
}

int ha_subito::delete_row(const uchar* buf) {
  return Guard(ha_thd(), "delete_row", [&]() -> int {
    Row row;
    mapper_->ToRow(buf, &row);
    if (share_->layout->hidden_pk()) {
      const uint32_t c = share_->layout->row_id_column();
      row[c] = row_id_;
    }
    subito::Transaction* txn = Txn();
    if (txn == nullptr) return HA_ERR_INTERNAL_ERROR;
    Status st = txn->Delete(EngineTable(), row);
    return st.ok() ? 0 : Error(st);
  });
}

// The counter after a row with auto-increment value v (negative values
// count as 0) was written, exactly as InnoDB computes it
// (innobase_next_autoinc with the increment and offset of this handler's
// last reservation, 1 and 0 before any): v + increment for the common case,
// but 2 * offset + increment for v = 0, which is how a negative explicit
// value moves InnoDB's counter.
ulonglong ha_subito::CounterAfter(ulonglong v) const {
  const ulonglong step = autoinc_increment_;
  const ulonglong offset = autoinc_offset_ > step ? 0 : autoinc_offset_;
  ulonglong next = v > offset ? v - offset : offset - v;
  next -= next % step;
  // Past the largest value: all are used up (the next request fails).
  if (next > ~0ULL - offset - step) return ~0ULL;
  return next + offset + step;
}

void ha_subito::SawAutoIncrement(Field* f, bool by_update) {
  // A value the statement did not take from its reservation moves the
  // counter, as in InnoDB, and the move stays if the statement fails (the
  // counter is not transactional). An UPDATE to 0 or less does not.
  if (f->is_null()) return;
  const ulonglong v = CounterValue(f, f->val_int());
  if (by_update ? v == 0 : v < stmt_reserved_end_) return;
  if (v > f->get_max_int_value()) return;
  const ulonglong next = CounterAfter(v);
  std::lock_guard<std::mutex> g(share_->mu);
  if (share_->next_auto_inc == 0 && !ReadCounterLocked()) return;
  if (next > share_->next_auto_inc) share_->next_auto_inc = next;
}

// Sets share_->next_auto_inc at its first use since start: one above the
// largest committed value in the index whose first part is the column (not
// persisted, as in InnoDB before 10.2), never below the table's
// AUTO_INCREMENT=N. Read by a transaction of its own: the caller's snapshot
// may be older than rows others committed since. share_->mu is held.
bool ha_subito::ReadCounterLocked() {
  ulonglong max = 0;
  const uint key = table->s->next_number_index;
  std::unique_ptr<subito::Transaction> reader =
      subito::mariadb::engine()->Begin(subito::Isolation::kReadCommitted);
  subito::Result<std::unique_ptr<subito::Cursor>> c =
      reader->OpenCursor(EngineTable(), share_->layout->key(key).engine_index);
  // The largest value is the last entry, or the first one if the column's
  // key part is descending.
  const bool desc = table->key_info[key].key_part[0].key_part_flag & HA_REVERSE_SORT;
  Status st = c.ok() ? (*c)->Seek(desc ? SeekOp::kFirst : SeekOp::kLast) : c.status();
  if (st.ok() && (*c)->Valid()) {
    // A record of its own: record[1] may hold the old row of an update.
    std::vector<uchar> buf(table->s->rec_buff_length);
    std::string storage;
    uchar* rec = buf.data();
    st = mapper_->FromRow((*c)->row(), rec, &storage);
    Field* f = table->next_number_field ? table->next_number_field : table->found_next_number_field;
    if (st.ok()) {
      const my_ptrdiff_t diff = rec - table->record[0];
      f->move_field_offset(diff);
      max = CounterValue(f, f->val_int());
      f->move_field_offset(-diff);
    }
  }
  if (c.ok()) c->reset();
  if (Status end = reader->Commit(); st.ok()) st = end;
  if (!st.ok()) {
    sql_print_error("Subito: cannot read the auto-increment counter of %s: %s",
                    table->s->table_name.str, st.ToString().c_str());
    return false;
  }
  share_->next_auto_inc = std::max<ulonglong>(max + 1, EngineTable()->def().auto_increment_start);
  return true;
}

void ha_subito::get_auto_increment(ulonglong offset, ulonglong increment, ulonglong nb_desired,
                                   ulonglong* first_value, ulonglong* nb_reserved) {
  *first_value = ~static_cast<ulonglong>(0);  // what an exception leaves: a read failure
  (void)Guard(ha_thd(), "get_auto_increment", [&]() -> int {
    std::lock_guard<std::mutex> g(share_->mu);
    if (share_->next_auto_inc == 0 && !ReadCounterLocked()) {
      *first_value = ~static_cast<ulonglong>(0);  // the server reports ER_AUTOINC_READ_FAILED
      return 0;
    }
    ulonglong v = share_->next_auto_inc;
    if (v > table->next_number_field->get_max_int_value()) {
      // Used up: the server reports the range error; the counter stays, as
      // InnoDB's does.
      *first_value = v;
      *nb_reserved = 0;
      return 0;
    }
    if (increment > 1) {
      // The first value >= v of the form offset + k * increment.
      if (v <= offset)
        v = offset;
      else
        v = offset + ((v - offset + increment - 1) / increment) * increment;
    }
    // As InnoDB: the statement's first request reserves what the server
    // estimates the statement inserts, later ones what is left of that (not
    // the server's doubling intervals), so the same statements leave the
    // same gaps.
    if (autoinc_rows_left_ == 0) autoinc_rows_left_ = std::max<ulonglong>(nb_desired, 1);
    *first_value = v;
    *nb_reserved = autoinc_rows_left_;
    const ulonglong span = autoinc_rows_left_ * increment;
    share_->next_auto_inc =
        span / increment != autoinc_rows_left_ || v > ~0ULL - span ? ~0ULL : v + span;
    stmt_reserved_end_ = share_->next_auto_inc;
    autoinc_increment_ = increment;
    autoinc_offset_ = offset;
    return 0;
  });
}

// ---- reads ----

int ha_subito::OpenCursor(uint32_t engine_index) {
  subito::Transaction* txn = Txn();
  if (txn == nullptr) return HA_ERR_INTERNAL_ERROR;
  subito::Result<std::unique_ptr<subito::Cursor>> c =
      txn->OpenCursor(EngineTable(), engine_index, read_mode_);
  if (!c.ok()) return Error(c.status());
  cursor_ = std::move(*c);
  return 0;
}

int ha_subito::ReadCurrent(uchar* buf, int end) {
  if (!cursor_ || !cursor_->Valid()) return end;
  const subito::ValueView record = cursor_->column(share_->layout->record_column());
  if (!std::holds_alternative<std::string_view>(record)) {
    return Error(Status::Corruption("row without a record"));
  }
  if (int err = FillRecord(std::get<std::string_view>(record), buf)) return err;
  if (share_->layout->hidden_pk()) {
    row_id_ = std::get<uint64_t>(cursor_->column(share_->layout->row_id_column()));
  }
  ForgetLastEntry();
  last_key_.assign(cursor_->key());
  has_last_key_ = true;
  return 0;
}

int ha_subito::LoadRow(const Row& row, uchar* buf) {
  const subito::Value& record = row[share_->layout->record_column()];
  if (!std::holds_alternative<std::string>(record)) {
    return Error(Status::Corruption("row without a record"));
  }
  if (int err = FillRecord(std::get<std::string>(record), buf)) return err;
  if (share_->layout->hidden_pk())
    row_id_ = std::get<uint64_t>(row[share_->layout->row_id_column()]);
  ForgetLastEntry();
  for (uint32_t c : EntryColumns()) last_entry_.push_back(row[c]);
  return 0;
}

int ha_subito::FillRecord(std::string_view packed, uchar* buf) {
  // Blob fields point into the packed bytes: keep a copy when there are
  // any (the cursor's row changes when it moves).
  Status st = mapper_->FromRecord(packed, buf, table->s->blob_fields ? &row_storage_ : nullptr);
  if (!st.ok()) return Error(st);
  // Reading keys only, the server takes an indexed virtual column from the
  // engine (it computes them only for whole rows); Subito's indexes hold
  // sort images, so compute it from the row, which is read whole anyway.
  if (table->vfield && keyread_enabled() && buf == table->record[0]) {
    for (Field** vf = table->vfield; *vf; ++vf) {
      if (!(*vf)->stored_in_db() && bitmap_is_set(table->read_set, (*vf)->field_index)) {
        table->update_virtual_field(*vf, true);
      }
    }
  }
  return 0;
}

const std::vector<uint32_t>& ha_subito::EntryColumns() const {
  return active_index != MAX_KEY ? share_->layout->key(active_index).entry_columns
                                 : share_->layout->def().primary_key;
}

int ha_subito::EnsureCursor() {
  if (cursor_) return 0;
  return OpenCursor(active_index != MAX_KEY ? share_->layout->key(active_index).engine_index : 0);
}

void ha_subito::ForgetLastEntry() {
  has_last_key_ = false;
  last_entry_.clear();
  last_was_miss_ = false;
}

int ha_subito::Reposition(bool forward) {
  if (!has_last_key_ && last_entry_.empty()) return HA_ERR_END_OF_FILE;
  if (int err = EnsureCursor()) return err;
  const SeekOp op = !forward ? SeekOp::kLT : last_was_miss_ ? SeekOp::kGE : SeekOp::kGT;
  Status st = has_last_key_ ? cursor_->SeekKey(op, last_key_) : cursor_->Seek(op, last_entry_);
  return st.ok() ? 0 : Error(st);
}

int ha_subito::rnd_init(bool) {
  return Guard(ha_thd(), "rnd_init", [&]() -> int {
    scan_started_ = false;
    ForgetLastEntry();
    return OpenCursor(0);
  });
}

int ha_subito::rnd_end() {
  return Guard(ha_thd(), "rnd_end", [&]() -> int {
    cursor_.reset();
    ForgetLastEntry();
    return 0;
  });
}

int ha_subito::rnd_next(uchar* buf) {
  return Guard(ha_thd(), "rnd_next", [&]() -> int {
    Status st;
    if (!cursor_ && scan_started_) {
      if (int err = Reposition(true)) return err;
    } else {
      if (int err = EnsureCursor()) return err;
      st = scan_started_ ? cursor_->Next() : cursor_->Seek(SeekOp::kFirst);
    }
    scan_started_ = true;
    if (!st.ok()) return Error(st);
    return ReadCurrent(buf, HA_ERR_END_OF_FILE);
  });
}

void ha_subito::position(const uchar* record) {
  (void)Guard(ha_thd(), "position", [&]() -> int {
    if (share_->layout->hidden_pk()) {
      int8store(ref, row_id_);
      return 0;
    }
    Row values;
    mapper_->KeyOfRecord(table->s->primary_key, record, &values);
    mapper_->RefOf(values, ref);
    return 0;
  });
}

int ha_subito::rnd_pos(uchar* buf, uchar* pos) {
  return Guard(ha_thd(), "rnd_pos", [&]() -> int {
    Row key;
    mapper_->KeyOfRef(pos, &key);
    subito::Transaction* txn = Txn();
    if (txn == nullptr) return HA_ERR_INTERNAL_ERROR;
    subito::Result<std::optional<Row>> r = txn->Get(EngineTable(), key, read_mode_);
    if (!r.ok()) return Error(r.status());
    if (!r->has_value()) return HA_ERR_KEY_NOT_FOUND;
    row_ = std::move(**r);
    return LoadRow(row_, buf);
  });
}

int ha_subito::index_init(uint idx, bool) {
  return Guard(ha_thd(), "index_init", [&]() -> int {
    active_index = idx;
    bounded_ = false;
    mbr_search_ = false;
    ForgetLastEntry();
    return OpenCursor(share_->layout->key(idx).engine_index);
  });
}

int ha_subito::index_end() {
  return Guard(ha_thd(), "index_end", [&]() -> int {
    cursor_.reset();
    active_index = MAX_KEY;
    return 0;
  });
}

int ha_subito::CheckPrefix(uchar* buf, int end) {
  if (!cursor_->Valid()) return end;
  // The values of a key prefix encode as a prefix of every key with them.
  const std::string_view key = cursor_->key();
  if (key.substr(0, search_key_.size()) != search_key_) return end;
  return ReadCurrent(buf, end);
}

int ha_subito::EncodeSearchKey() {
  subito::Result<std::string> k = cursor_->EncodeKey(search_prefix_);
  if (!k.ok()) return Error(k.status());
  search_key_ = std::move(*k);
  return 0;
}

int ha_subito::Seek(uchar* buf, SeekOp op, bool must_match) {
  if (int err = EnsureCursor()) return err;
  if (int err = EncodeSearchKey()) return err;
  Status st = cursor_->SeekKey(op, search_key_);
  if (!st.ok()) return Error(st);
  const int r =
      must_match ? CheckPrefix(buf, HA_ERR_KEY_NOT_FOUND) : ReadCurrent(buf, HA_ERR_KEY_NOT_FOUND);
  if (r == HA_ERR_KEY_NOT_FOUND) {
    // Next/prev reposition from the missed key (HANDLER ... READ NEXT).
    ForgetLastEntry();
    if (!search_key_.empty()) {  // an empty prefix: nothing to continue from
      last_key_ = search_key_;
      has_last_key_ = true;
      last_was_miss_ = true;
    }
  }
  return r;
}

int ha_subito::index_read_map(uchar* buf, const uchar* key, key_part_map keypart_map,
                              enum ha_rkey_function find_flag) {
  return Guard(ha_thd(), "index_read_map", [&]() -> int {
    mbr_search_ = false;
    switch (find_flag) {
      case HA_READ_MBR_CONTAIN:
      case HA_READ_MBR_INTERSECT:
      case HA_READ_MBR_WITHIN:
      case HA_READ_MBR_DISJOINT:
      case HA_READ_MBR_EQUAL:
        if (!share_->layout->key(active_index).spatial) return HA_ERR_UNSUPPORTED;
        return MbrSearch(buf, key, find_flag);
      default:
        break;
    }
    const uint parts = PartsOf(table->key_info[active_index], keypart_map);
    mapper_->KeyPrefix(active_index, key, parts, &search_prefix_);
    bounded_ = false;
    switch (find_flag) {
      case HA_READ_KEY_EXACT:
      case HA_READ_PREFIX:
        bounded_ = true;
        return Seek(buf, SeekOp::kGE, true);
      case HA_READ_KEY_OR_NEXT:
        return Seek(buf, SeekOp::kGE, false);
      case HA_READ_AFTER_KEY:
        return Seek(buf, SeekOp::kGT, false);
      case HA_READ_BEFORE_KEY:
        return Seek(buf, SeekOp::kLT, false);
      case HA_READ_KEY_OR_PREV:
      case HA_READ_PREFIX_LAST_OR_PREV:
        return Seek(buf, SeekOp::kLE, false);
      case HA_READ_PREFIX_LAST:
        bounded_ = true;
        return Seek(buf, SeekOp::kLE, true);
      default:
        return HA_ERR_UNSUPPORTED;
    }
  });
}

int ha_subito::MbrSearch(uchar* buf, const uchar* key, enum ha_rkey_function flag) {
  // The key image of a spatial part: xmin, xmax, ymin, ymax (float8store).
  for (int i = 0; i < 4; ++i) float8get(mbr_[i], key + 8 * i);
  mbr_flag_ = flag;
  mbr_search_ = true;
  bounded_ = false;
  ForgetLastEntry();
  if (int err = EnsureCursor()) return err;
  Status st = cursor_->Seek(SeekOp::kFirst);
  if (!st.ok()) return Error(st);
  return NextMbrMatch(buf, /*step=*/false, HA_ERR_KEY_NOT_FOUND);
}

int ha_subito::NextMbrMatch(uchar* buf, bool step, int end) {
  const uint32_t column = share_->layout->key(active_index).parts[0].column;
  for (;; step = true) {
    if (step) {
      Status st = cursor_->Next();
      if (!st.ok()) return Error(st);
    }
    if (!cursor_->Valid()) return end;
    const subito::ValueView v = cursor_->column(column);
    if (std::holds_alternative<std::string_view>(v) && MbrMatches(std::get<std::string_view>(v))) {
      return ReadCurrent(buf, end);
    }
    if (thd_kill_level(ha_thd())) return HA_ERR_ABORTED_BY_USER;
  }
}

bool ha_subito::MbrMatches(std::string_view image) const {
  if (image.size() != 4 * sizeof(double)) return true;  // let the server decide
  double s[4];
  for (int i = 0; i < 4; ++i) float8get(s[i], reinterpret_cast<const uchar*>(image.data()) + 8 * i);
  const double* q = mbr_;
  bool all = true;
  for (int d = 0; d < 4; d += 2) {  // x (0, 1), then y (2, 3): min, max
    const double smin = s[d], smax = s[d + 1], qmin = q[d], qmax = q[d + 1];
    switch (mbr_flag_) {
      case HA_READ_MBR_INTERSECT:
        all = all && smin <= qmax && qmin <= smax;
        break;
      case HA_READ_MBR_CONTAIN:  // the query's MBR contains the row's (MBRWithin)
        all = all && qmin <= smin && smax <= qmax;
        break;
      case HA_READ_MBR_WITHIN:  // the row's MBR contains the query's (MBRContains)
        all = all && smin <= qmin && qmax <= smax;
        break;
      case HA_READ_MBR_EQUAL:
        all = all && smin == qmin && smax == qmax;
        break;
      case HA_READ_MBR_DISJOINT:
        if (smax < qmin || qmax < smin) return true;
        all = false;
        break;
      default:
        return true;
    }
  }
  return all;
}

int ha_subito::index_read_last_map(uchar* buf, const uchar* key, key_part_map keypart_map) {
  return Guard(ha_thd(), "index_read_last_map",
               [&]() -> int { return index_read_map(buf, key, keypart_map, HA_READ_PREFIX_LAST); });
}

int ha_subito::Step(uchar* buf, bool forward) {
  if (!cursor_ || last_was_miss_) {
    if (int err = Reposition(forward)) return err;
    return ReadCurrent(buf, HA_ERR_END_OF_FILE);
  }
  if (!cursor_->Valid()) return HA_ERR_END_OF_FILE;
  Status st = forward ? cursor_->Next() : cursor_->Prev();
  if (!st.ok()) return Error(st);
  return ReadCurrent(buf, HA_ERR_END_OF_FILE);
}

int ha_subito::index_next(uchar* buf) {
  return Guard(ha_thd(), "index_next", [&]() -> int { return Step(buf, true); });
}

int ha_subito::index_prev(uchar* buf) {
  return Guard(ha_thd(), "index_prev", [&]() -> int { return Step(buf, false); });
}

int ha_subito::index_first(uchar* buf) {
  return Guard(ha_thd(), "index_first", [&]() -> int {
    bounded_ = false;
    mbr_search_ = false;
    if (int err = EnsureCursor()) return err;
    Status st = cursor_->Seek(SeekOp::kFirst);
    if (!st.ok()) return Error(st);
    return ReadCurrent(buf, HA_ERR_END_OF_FILE);
  });
}

int ha_subito::index_last(uchar* buf) {
  return Guard(ha_thd(), "index_last", [&]() -> int {
    bounded_ = false;
    mbr_search_ = false;
    if (int err = EnsureCursor()) return err;
    Status st = cursor_->Seek(SeekOp::kLast);
    if (!st.ok()) return Error(st);
    return ReadCurrent(buf, HA_ERR_END_OF_FILE);
  });
}

int ha_subito::index_next_same(uchar* buf, const uchar* key, uint keylen) {
  return Guard(ha_thd(), "index_next_same", [&]() -> int {
    if (!cursor_ || !cursor_->Valid()) return HA_ERR_END_OF_FILE;
    if (mbr_search_) return NextMbrMatch(buf, /*step=*/true, HA_ERR_END_OF_FILE);
    if (!bounded_) {
      // The parts that make up keylen.
      uint len = 0, n = 0;
      const KEY& ki = table->key_info[active_index];
      while (n < ki.user_defined_key_parts && len < keylen) len += ki.key_part[n++].store_length;
      mapper_->KeyPrefix(active_index, key, n, &search_prefix_);
      if (int err = EncodeSearchKey()) return err;
      bounded_ = true;
    }
    Status st = cursor_->Next();
    if (!st.ok()) return Error(st);
    return CheckPrefix(buf, HA_ERR_END_OF_FILE);
  });
}

// ---- CHECK TABLE ----

int ha_subito::check(THD* thd, HA_CHECK_OPT*) {
  return Guard(ha_thd(), "check", [&]() -> int {
    subito::Transaction* txn = Txn();
    if (txn == nullptr) return HA_ADMIN_FAILED;
    const TableLayout& layout = *share_->layout;
    const size_t indexes = layout.def().indexes.size() + 1;
    std::vector<uint64_t> counts(indexes, 0);
    std::string storage;
    for (uint32_t ix = 0; ix < indexes; ++ix) {
      subito::Result<std::unique_ptr<subito::Cursor>> c =
          txn->OpenCursor(EngineTable(), ix, subito::ReadMode::kSnapshot);
      Status st = c.ok() ? (*c)->Seek(SeekOp::kFirst) : c.status();
      while (st.ok() && (*c)->Valid()) {
        if (ix == 0) st = mapper_->FromRow((*c)->row(), table->record[1], &storage);
        if (!st.ok()) break;
        ++counts[ix];
        if (thd_killed(thd)) return HA_ADMIN_FAILED;
        st = (*c)->Next();
      }
      if (!st.ok()) {
        push_warning_printf(thd, Sql_condition::WARN_LEVEL_WARN, ER_NOT_KEYFILE, "Subito: %s",
                            st.ToString().c_str());
        // Only damaged bytes make the table corrupt: a check cut short (its
        // snapshot cut, killed, a busy table) just failed.
        return st.IsCorruption() ? HA_ADMIN_CORRUPT : HA_ADMIN_FAILED;
      }
    }
    for (uint32_t ix = 1; ix < indexes; ++ix) {
      if (counts[ix] != counts[0]) {
        push_warning_printf(thd, Sql_condition::WARN_LEVEL_WARN, ER_NOT_KEYFILE,
                            "Subito: index %s has %llu entries for %llu rows",
                            layout.def().indexes[ix - 1].name.c_str(),
                            static_cast<unsigned long long>(counts[ix]),
                            static_cast<unsigned long long>(counts[0]));
        return HA_ADMIN_CORRUPT;
      }
    }
    return HA_ADMIN_OK;
  });
}

// ---- ANALYZE TABLE ----

int ha_subito::analyze(THD* thd, HA_CHECK_OPT*) {
  return Guard(thd, "analyze", [&]() -> int {
    Status st = EngineTable()->Recount();
    if (st.ok()) return HA_ADMIN_OK;
    push_warning_printf(thd, Sql_condition::WARN_LEVEL_WARN, ER_NOT_KEYFILE, "Subito: %s",
                        st.ToString().c_str());
    return st.IsCorruption() ? HA_ADMIN_CORRUPT : HA_ADMIN_FAILED;
  });
}

// ---- statistics ----

ha_rows ha_subito::records_in_range(uint inx, const key_range* min_key, const key_range* max_key,
                                    page_range*) {
  return GuardOr(ha_thd(), "records_in_range", ha_rows{HA_POS_ERROR}, [&]() -> ha_rows {
    const KEY& key = table->key_info[inx];
    // An MBR search reads the whole index (MbrSearch): say so.
    if (key.flags & HA_SPATIAL) return std::max<ha_rows>(1, stats.records);
    std::optional<subito::Table::Bound> lo, hi;
    if (min_key) {
      lo.emplace();
      mapper_->KeyPrefix(inx, min_key->key, PartsOf(key, min_key->keypart_map), &lo->prefix);
      lo->inclusive = min_key->flag != HA_READ_AFTER_KEY;
    }
    if (max_key) {
      hi.emplace();
      mapper_->KeyPrefix(inx, max_key->key, PartsOf(key, max_key->keypart_map), &hi->prefix);
      hi->inclusive = max_key->flag != HA_READ_BEFORE_KEY;
    }
    subito::Result<uint64_t> n =
        EngineTable()->EstimateRange(share_->layout->key(inx).engine_index, lo, hi);
    if (!n.ok()) return HA_POS_ERROR;
    // 0 would tell the optimizer that the range is certainly empty.
    return std::max<ha_rows>(1, *n);
  });
}

void ha_subito::UpdateRecPerKey(bool force) {
  // Recomputed when the table has changed by a tenth since the last time.
  const uint64_t rows = stats.records;
  {
    std::lock_guard<std::mutex> g(share_->mu);
    if (!force && share_->rec_per_key_valid &&
        (rows < share_->rec_per_key_rows * 11 / 10 + 16 &&
         rows + share_->rec_per_key_rows / 10 + 16 > share_->rec_per_key_rows)) {
      return;
    }
    share_->rec_per_key_valid = true;
    share_->rec_per_key_rows = rows;
  }
  for (uint k = 0; k < table->s->keys; ++k) {
    KEY& key = table->key_info[k];
    subito::Result<std::vector<double>> per_key =
        EngineTable()->EstimateEntriesPerKey(share_->layout->key(k).engine_index);
    if (!per_key.ok()) continue;
    for (uint p = 0; p < key.user_defined_key_parts && p < per_key->size(); ++p) {
      key.rec_per_key[p] = static_cast<ulong>(std::max(1.0, (*per_key)[p] + 0.5));
    }
    if (key.flags & HA_NOSAME) key.rec_per_key[key.user_defined_key_parts - 1] = 1;
  }
}

int ha_subito::info(uint flag) {
  return Guard(ha_thd(), "info", [&]() -> int {
    if (flag & HA_STATUS_VARIABLE) {
      const subito::Table::Size s = EngineTable()->Sizes();
      stats.records = s.rows;
      // InnoDB's rule: the optimizer takes a table reported empty for empty
      // (a const table), which, without locks, other sessions may not keep;
      // only SHOW TABLE STATUS (HA_STATUS_TIME) and opening see a 0. Plans,
      // and the server paths they take, then follow InnoDB's.
      if (stats.records == 0 && !(flag & (HA_STATUS_TIME | HA_STATUS_OPEN))) stats.records = 1;
      stats.deleted = 0;
      const uint64_t page_bytes = s.primary_pages * subito::mariadb::PageSize();
      stats.data_file_length = page_bytes;
      stats.index_file_length = s.pages * subito::mariadb::PageSize() - page_bytes;
      stats.mean_rec_length = stats.records ? static_cast<ulong>(page_bytes / stats.records) : 0;
    }
    if (flag & (HA_STATUS_CONST | HA_STATUS_VARIABLE)) UpdateRecPerKey(flag & HA_STATUS_CONST);
    if (flag & HA_STATUS_ERRKEY) errkey = dup_key_ >= 0 ? static_cast<uint>(dup_key_) : 0;
    if (flag & HA_STATUS_AUTO) {
      std::lock_guard<std::mutex> g(share_->mu);
      stats.auto_increment_value =
          share_->next_auto_inc ? share_->next_auto_inc
                                : std::max<ulonglong>(1, EngineTable()->def().auto_increment_start);
    }
    return 0;
  });
}

// The optimizer's costs are InnoDB's (pages of the clustered index, at least
// one; a primary-key range costs its share of that plus a seek per range),
// so that both engines get the same plans for the same statistics.
double ha_subito::scan_time() {
  return std::max(1.0, static_cast<double>(stats.data_file_length / subito::mariadb::PageSize()));
}

double ha_subito::read_time(uint index, uint ranges, ha_rows rows) {
  if (index != table->s->primary_key) return handler::read_time(index, ranges, rows);
  const double scan = scan_time();
  const ha_rows total = estimate_rows_upper_bound();
  if (total < rows) return scan;
  return ranges + static_cast<double>(rows) / static_cast<double>(total) * scan;
}

int ha_subito::extra(enum ha_extra_function operation) {
  return Guard(ha_thd(), "extra", [&]() -> int {
    switch (operation) {
      // ALTER TABLE ... ALGORITHM=COPY and CREATE TABLE ... SELECT fill a new
      // table that nobody else sees until the statement ends.
      case HA_EXTRA_BEGIN_COPY:
      case HA_EXTRA_BEGIN_ALTER_IGNORE_COPY:
        bulk_ = true;
        bulk_rows_ = 0;
        return 0;
      case HA_EXTRA_END_COPY:
        return EndBulk(true);
      case HA_EXTRA_ABORT_COPY:
        return EndBulk(false);
      default:
        return 0;
    }
  });
}

int ha_subito::reset() {
  return Guard(ha_thd(), "reset", [&]() -> int {
    cursor_.reset();
    txn_loader_.reset();  // a statement that ended without end_bulk_insert
    bounded_ = false;
    search_prefix_.clear();
    search_key_.clear();
    dup_key_ = -1;
    return 0;
  });
}
