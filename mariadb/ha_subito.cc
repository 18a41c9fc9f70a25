// ha_subito: DDL, transactions and writes of the handler. Reads, CHECK,
// ANALYZE and the optimizer's statistics are in ha_subito_read.cc.
#include "ha_subito.h"

#include <algorithm>
#include <array>

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

// A row change's rows, kept by the handler between calls: when the call
// returns, a row's bytes stay up to kKeepBytes (a server has a handler per
// open table and connection: three rows of 4 KiB each are 24 MiB for 2,000
// handlers, and most rows are far smaller), larger ones go.
template <size_t N>
struct KeptRows {
  std::array<Row*, N> rows;
  ~KeptRows() {
    constexpr size_t kKeepBytes = 4 << 10;
    for (Row* row : rows) {
      size_t bytes = row->capacity() * sizeof(subito::Value);
      for (const subito::Value& v : *row) {
        if (const auto* s = std::get_if<std::string>(&v)) bytes += s->capacity();
      }
      if (bytes > kKeepBytes) Row().swap(*row);
    }
  }
};

}  // namespace

ha_subito::ha_subito(handlerton* hton, TABLE_SHARE* share) : handler(hton, share) {}

ha_subito::~ha_subito() {
  if (bulk_txn_) (void)bulk_txn_->Rollback();
}

ulonglong ha_subito::table_flags() const {
  // No HA_PARTIAL_COLUMN_READ: the server then takes records it compares or
  // writes back as whole, which they are (a read under a write lock fills
  // every field: FieldsToFill); other reads fill only what they use.
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
    share_->rec_per_key_rows.store(subito::mariadb::SubitoShare::kNoEstimate);
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
    keys_reversible_.assign(table->s->keys, false);
    for (uint k = 0; k < table->s->keys; ++k) keys_reversible_[k] = mapper_->ImagesReversible(k);
    ref_length = share_->layout->ref_length();
    // A table scan walks the primary key (as InnoDB's): the server then reads
    // all rows first when a statement changes the key it scans, instead of
    // meeting moved rows again.
    key_used_on_scan = table->s->primary_key;
    info(HA_STATUS_VARIABLE | HA_STATUS_CONST);
    return 0;
  });
}

handler* ha_subito::clone(const char* name, MEM_ROOT* mem_root) {
  auto* copy = static_cast<ha_subito*>(handler::clone(name, mem_root));
  if (copy != nullptr) copy->lock_type_ = lock_type_;
  return copy;
}

int ha_subito::OpenShare(const char* name) {
  share_->table = subito::mariadb::engine()->FindTable(EngineName(name));
  if (share_->table == nullptr) return HA_ERR_NO_SUCH_TABLE;
  if (!share_->layout) {
    subito::Result<TableLayout> layout = TableLayout::Build(
        table->s, EngineName(name), subito::mariadb::PageSize(), &share_->table->def());
    if (!layout.ok()) {
      sql_print_error("Subito: cannot open %s: %s", name, layout.status().ToString().c_str());
      return HA_ERR_UNSUPPORTED;
    }
    if (layout->def().columns.size() != share_->table->def().columns.size()) {
      sql_print_error("Subito: %s does not match the engine's catalog (%zu columns, catalog %zu)",
                      name, layout->def().columns.size(), share_->table->def().columns.size());
      return HA_ERR_TABLE_DEF_CHANGED;
    }
    for (uint k = 0; k < table->s->keys; ++k) {
      bool ties = false;
      for (const subito::mariadb::PartLayout& p : layout->key(k).parts) ties = ties || p.nopad_ties;
      if (ties) {
        sql_print_warning(
            "Subito: index %s of %s was created before images of NO PAD collated parts kept "
            "their weights' length: 'a' and 'a' followed by NUL are one key there; ALTER TABLE "
            "... FORCE rebuilds it",
            table->s->key_info[k].name.str, name);
      }
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
    for (Row* r : {&change_row_, &old_row_, &new_row_}) Row().swap(*r);
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
    Row& row = change_row_;
    mapper_->ToRow(buf, &row);
    KeptRows<1> kept{{&row}};
    if (share_->layout->hidden_pk()) {
      subito::Result<uint64_t> id = t->NextAutoIncrement();
      if (!id.ok()) return Error(id.status());
      row[share_->layout->row_id_column()] = *id;
    }
    int err = 0;
    if (bulk_) {
      err = BulkWrite(row);
    } else if (txn_loader_) {
      // A loader that cannot take the row inserts it (bulk_insert.cc).
      if (subito::Transaction* txn = Txn(); txn != nullptr) {
        txn->SetReplacesDuplicates(duplicates_ != 0);
      }
      if (Status st = txn_loader_->Add(row); !st.ok()) err = Error(st);
    } else if (subito::Transaction* txn = Txn(); txn == nullptr) {
      return HA_ERR_INTERNAL_ERROR;
    } else {
      txn->SetReplacesDuplicates(duplicates_ != 0);
      if (Status st = txn->Insert(t, row); !st.ok()) err = Error(st);
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
    Row& old_row = old_row_;
    Row& new_row = new_row_;
    mapper_->ToRow(old_data, &old_row);
    mapper_->ToRow(new_data, &new_row);
    KeptRows<2> kept{{&old_row, &new_row}};
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
    txn->SetReplacesDuplicates(duplicates_ != 0);
    Status st = txn->Update(EngineTable(), old_row, new_row);
    return st.ok() ? 0 : Error(st);
  });
}

int ha_subito::delete_row(const uchar* buf) {
  return Guard(ha_thd(), "delete_row", [&]() -> int {
    Row& row = change_row_;
    mapper_->ToRow(buf, &row);
    KeptRows<1> kept{{&row}};
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
      case HA_EXTRA_INSERT_WITH_UPDATE:
        duplicates_ |= kDupUpdate;
        return 0;
      case HA_EXTRA_NO_IGNORE_DUP_KEY:
        duplicates_ &= ~kDupUpdate;
        return 0;
      case HA_EXTRA_WRITE_CAN_REPLACE:
        duplicates_ |= kDupReplace;
        return 0;
      case HA_EXTRA_WRITE_CANNOT_REPLACE:
        duplicates_ &= ~kDupReplace;
        return 0;
      case HA_EXTRA_RESET_STATE:
        duplicates_ = 0;
        return 0;
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
    duplicates_ = 0;
    semi_consistent_ = false;  // a statement that failed before try_semi_consistent_read(0)
    return 0;
  });
}
