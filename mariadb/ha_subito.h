// ha_subito: MariaDB's handler for Subito tables, a translation layer only.
// Rows and keys go through RowMapper; transactions live per connection in
// Trx (subito_trx.h); the engine does the rest.
#pragma once

#include <my_global.h>
// clang-format off: the server's headers depend on this order
#include "handler.h"
#include "my_base.h"
// clang-format on

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "row_mapper.h"
#include "subito/database.h"
#include "table_layout.h"

// Errors with no HA_ERR_* of their own; the message comes from the engine
// (handler::get_error_message).
#define HA_ERR_SUBITO_ENGINE (HA_ERR_LAST + 1)

extern const char* ha_subito_exts[];

// Table options of the engine (handlerton::table_options). The server
// ignores DATA DIRECTORY in ALTER TABLE, for every engine; PAGE_DIRECTORY
// places a table's page files at CREATE TABLE and moves them with a copying
// ALTER TABLE (reads go on, writes wait). '' is the engine's own directory;
// unset, DATA DIRECTORY decides.
struct ha_table_option_struct {
  const char* page_directory;
};
extern ha_create_table_option subito_table_options[];

namespace subito::mariadb {

struct Trx;

// Shared by every open handler of one table.
class SubitoShare : public Handler_share {
 public:
  std::mutex mu;
  Table* table = nullptr;  // re-resolved after TRUNCATE
  std::optional<TableLayout> layout;
  // Next value of the auto-increment column; 0 until read from the index.
  uint64_t next_auto_inc = 0;
  // Rows when rec_per_key was last estimated (kNoEstimate: none yet, or
  // not since TRUNCATE): read without mu by every statement's info().
  static constexpr uint64_t kNoEstimate = ~uint64_t{0};
  std::atomic<uint64_t> rec_per_key_rows{kNoEstimate};
};

}  // namespace subito::mariadb

class ha_subito final : public handler {
 public:
  ha_subito(handlerton* hton, TABLE_SHARE* share);
  ~ha_subito() override;

  ulonglong table_flags() const override;
  ulong index_flags(uint inx, uint part, bool all_parts) const override;
  uint max_supported_record_length() const override { return HA_MAX_REC_LENGTH; }
  uint max_supported_keys() const override { return MAX_KEY; }
  uint max_supported_key_parts() const override { return MAX_REF_PARTS; }
  uint max_supported_key_length() const override { return 3072; }
  uint max_supported_key_part_length() const override { return 3072; }
  const char* index_type(uint key) override;

  int open(const char* name, int mode, uint test_if_locked) override;
  // A clone (index merge scans the extra keys with one) reads as this
  // handler does: the server locks it with F_RDLCK only, so it takes this
  // handler's lock type (a locking read locks, as InnoDB's clone does).
  handler* clone(const char* name, MEM_ROOT* mem_root) override;
  int close() override;
  int create(const char* name, TABLE* form, HA_CREATE_INFO* info) override;
  int delete_table(const char* name) override;
  int rename_table(const char* from, const char* to) override;
  // TRUNCATE of a TEMPORARY table (base tables are recreated through
  // create(), HTON_CAN_RECREATE): the engine table is dropped and created
  // again with the same definition.
  int truncate() override;
  void update_create_info(HA_CREATE_INFO* create_info) override;

  int write_row(const uchar* buf) override;
  int update_row(const uchar* old_data, const uchar* new_data) override;
  int delete_row(const uchar* buf) override;

  int rnd_init(bool scan) override;
  int rnd_end() override;
  int rnd_next(uchar* buf) override;
  int rnd_pos(uchar* buf, uchar* pos) override;
  void position(const uchar* record) override;
  int cmp_ref(const uchar* ref1, const uchar* ref2) override;
  void unlock_row() override;
  void try_semi_consistent_read(bool yes) override;
  bool was_semi_consistent_read() override;

  int index_init(uint idx, bool sorted) override;
  int index_end() override;
  int index_read_map(uchar* buf, const uchar* key, key_part_map keypart_map,
                     enum ha_rkey_function find_flag) override;
  int index_read_last_map(uchar* buf, const uchar* key, key_part_map keypart_map) override;
  int index_next(uchar* buf) override;
  int index_prev(uchar* buf) override;
  int index_first(uchar* buf) override;
  int index_last(uchar* buf) override;
  int index_next_same(uchar* buf, const uchar* key, uint keylen) override;

  ha_rows records_in_range(uint inx, const key_range* min_key, const key_range* max_key,
                           page_range* pages) override;
  int info(uint flag) override;
  int extra(enum ha_extra_function operation) override;
  void start_bulk_insert(ha_rows rows, uint flags) override;
  int end_bulk_insert() override;
  int reset() override;
  double scan_time() override;
  // Any index may be scanned to give an order, as InnoDB allows: without
  // this a GROUP BY or ORDER BY without LIMIT never reads an index in order.
  const key_map* keys_to_use_for_scanning() override { return &key_map_full; }
  double read_time(uint index, uint ranges, ha_rows rows) override;

  // CHECK TABLE: every row decodes, and every index has one entry per row.
  int check(THD* thd, HA_CHECK_OPT* opt) override;
  // ANALYZE TABLE: index entries counted again (the row count a crash may
  // have left off by a few percent); the other statistics are always current.
  int analyze(THD* thd, HA_CHECK_OPT* opt) override;
  // OPTIMIZE TABLE rebuilds the table (a copying ALTER), as InnoDB's does.
  int optimize(THD*, HA_CHECK_OPT*) override { return HA_ADMIN_TRY_ALTER; }

  int external_lock(THD* thd, int lock_type) override;
  int start_stmt(THD* thd, thr_lock_type lock_type) override;
  uint lock_count() const override { return 0; }
  THR_LOCK_DATA** store_lock(THD* thd, THR_LOCK_DATA** to, enum thr_lock_type lock_type) override;

  void get_auto_increment(ulonglong offset, ulonglong increment, ulonglong nb_desired_values,
                          ulonglong* first_value, ulonglong* nb_reserved_values) override;
  bool get_error_message(int error, String* buf) override;

 private:
  subito::mariadb::SubitoShare* GetShare();
  // Resolves the engine table and the layout; share_->mu held.
  int OpenShare(const char* name);
  subito::Transaction* Txn();
  subito::Table* EngineTable() const { return share_->table; }
  int Error(const subito::Status& st);
  // Reads the cursor's current row into buf and remembers its key, or
  // returns `end` if none.
  int ReadCurrent(uchar* buf, int end);
  // Fills buf from a whole engine row and remembers its position.
  int LoadRow(const subito::Row& row, uchar* buf);
  // Fills buf from the row's packed record bytes.
  int FillRecord(std::string_view packed, uchar* buf);
  // How many leading fields a read into buf fills (FromRecord).
  uint FieldsToFill(const uchar* buf) const;
  int OpenCursor(uint32_t engine_index);
  // Seeks the cursor to search_prefix_ (encoded into search_key_).
  // must_match: a row without the prefix is not found; exact: a locking
  // read bounds the cursor by the prefix (cursor_bounded_).
  // end_is_key: an exact seek whose end_range is its own key (EndIsSeekKey).
  int Seek(uchar* buf, subito::SeekOp op, bool must_match, bool exact = false,
           bool end_is_key = false);
  int EncodeSearchKey();
  // SPATIAL keys: the index holds each row's MBR image, in no useful order,
  // so an MBR search reads the index through and keeps the entries whose
  // MBR stands in the searched relation to the query's (the server checks
  // the exact predicate on each row it gets).
  int MbrSearch(uchar* buf, const uchar* key, enum ha_rkey_function flag);
  int NextMbrMatch(uchar* buf, bool step, int end);
  bool MbrMatches(std::string_view image) const;
  int CheckPrefix(uchar* buf, int end);
  int BulkWrite(const subito::Row& row);
  // Moves the auto-increment counter above an explicit value.
  void SawAutoIncrement(Field* f, bool by_update);
  ulonglong CounterAfter(ulonglong v) const;
  bool ReadCounterLocked();
  int CheckRowSize(const uchar* record);
  bool DuplicateMovesCounter() const;
  // Entries per key prefix for the optimizer (KEY::rec_per_key).
  void UpdateRecPerKey(bool force);
  int EndBulk(bool commit);

  subito::mariadb::SubitoShare* share_ = nullptr;
  std::unique_ptr<subito::mariadb::RowMapper> mapper_;
  std::unique_ptr<subito::Cursor> cursor_;
  bool scan_started_ = false;
  subito::ReadMode read_mode_ = subito::ReadMode::kSnapshot;
  thr_lock_type lock_type_ = TL_READ;
  // Moves a cursor that a statement boundary closed (HANDLER ... READ NEXT)
  // to the entry after (or before) the last one read.
  int Reposition(bool forward);
  void ForgetLastEntry();
  // index_next / index_prev.
  int Step(uchar* buf, bool forward);
  int EnsureCursor(bool end_is_key = false);  // end_is_key: as SyncEnd's
  // Index-only reads: a keyread of a secondary key whose images give its
  // values back (RowMapper::ImagesReversible) in a snapshot read reads the
  // index's entries without their rows (Cursor::SetKeysOnly). Called before
  // each positioning of the cursor: the server may start a keyread after
  // index_init.
  void SyncKeysOnly();
  std::vector<bool> keys_reversible_;  // by MariaDB key, set at open
  bool keys_only_ = false;             // what the cursor was last told
  // A locking range read (read_range_first set end_range) tells the cursor
  // where the range ends (Cursor::SetEnd), so that the first entry past it
  // is locked as InnoDB locks it (a secondary entry alone in shared mode).
  // Called with SyncKeysOnly.
  // end_is_key: the positioning is an exact seek whose end_range is its own
  // key, inclusive (an equality range: UPDATE ... WHERE id = 1). The seek's
  // prefix bound stops where that end would (Cursor::SetEnd: a key with the
  // prefix is not past an inclusive end of the same prefix), so the end is
  // only cleared for that seek. A step after it, which repositions without
  // the bound, sets the end as usual.
  int SyncEnd(bool end_is_key = false);
  bool EndIsSeekKey(const uchar* key, key_part_map keypart_map) const;
  // The end_range last told to the cursor.
  bool cursor_has_end_ = false;
  enum ha_rkey_function end_flag_ = HA_READ_KEY_EXACT;
  key_part_map end_map_ = 0;
  std::string end_key_;
  // The engine key columns of the current index (the primary key for scans).
  const std::vector<uint32_t>& EntryColumns() const;
  // The encoded key of the last entry read through the cursor
  // (has_last_key_), or else the key of the row rnd_pos read (last_entry_).
  std::string last_key_;
  bool has_last_key_ = false;
  subito::Row last_entry_;
  // last_key_ is a key prefix an index read found nothing at: a later
  // NEXT/PREV (HANDLER) continues from where that key would be, as in InnoDB.
  bool last_was_miss_ = false;
  // The prefix of the last index read, for index_next_same (bounded scans),
  // and its encoding.
  subito::Row search_prefix_;
  std::string search_key_;
  bool bounded_ = false;
  // The cursor was positioned by an exact-prefix seek of a locking read
  // (SeekOp::kEq, kEqLast): it neither locks nor waits for the first key
  // past the prefix (a gap lock before it, as InnoDB's ROW_SEL_EXACT), and
  // its steps stay in the prefix (index_next_same); index_next/prev go on
  // past it from the last entry read, as InnoDB's do.
  bool cursor_bounded_ = false;
  bool mbr_search_ = false;  // index_next_same continues an MBR search
  enum ha_rkey_function mbr_flag_ = HA_READ_MBR_INTERSECT;
  double mbr_[4] = {};       // the query's xmin, xmax, ymin, ymax
  std::string row_storage_;  // the current row's packed bytes (blob data)
  subito::Row row_;          // the row rnd_pos read
  // position()'s and rnd_pos()'s primary key values: kept, so that a
  // filesort's call per row does not allocate the vector anew.
  subito::Row ref_values_;
  // write_row's and delete_row's row, and update_row's two: kept between
  // calls, so that a row change does not allocate them (and their records'
  // bytes) anew; let go after a row of large values (KeptRows).
  subito::Row change_row_, old_row_, new_row_;
  // try_semi_consistent_read: an UPDATE at READ COMMITTED (Cursor::SetSemiConsistent).
  bool semi_consistent_ = false;
  uint64_t row_id_ = 0;  // hidden primary key of the current row
  // ALTER TABLE's copy writes through its own transaction, committed in
  // batches, so that the copy of a large table fits the log.
  std::unique_ptr<subito::Transaction> bulk_txn_;
  std::unique_ptr<subito::BulkLoader> loader_;
  bool bulk_ = false;
  // The statement's rows go through its transaction's bulk insert
  // (start_bulk_insert) until end_bulk_insert.
  std::unique_ptr<subito::BulkLoader> txn_loader_;
  uint64_t bulk_rows_ = 0;
  int dup_key_ = -1;
  // REPLACE (kDupReplace) or INSERT ... ON DUPLICATE KEY UPDATE
  // (kDupUpdate), from extra(): a duplicate key is locked exclusively, as
  // InnoDB's trx->duplicates (TRX_DUP_REPLACE, TRX_DUP_IGNORE) does.
  static constexpr unsigned kDupUpdate = 1, kDupReplace = 2;
  unsigned duplicates_ = 0;
  // Auto-increment values the statement still has reserved (InnoDB's
  // trx->n_autoinc_rows): set by its first get_auto_increment.
  ulonglong autoinc_rows_left_ = 0;
  // The end of the statement's reservation (InnoDB's autoinc_last_value),
  // and the increment and offset of this handler's last one.
  ulonglong stmt_reserved_end_ = 0;
  ulonglong autoinc_increment_ = 1;
  ulonglong autoinc_offset_ = 0;
};
