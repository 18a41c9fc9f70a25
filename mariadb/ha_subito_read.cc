// ha_subito's reads (cursors over the engine's indexes: scans, positions,
// index lookups, spatial searches), CHECK and ANALYZE TABLE, and the
// statistics the optimizer asks for. Writes and DDL are in ha_subito.cc.
#include "ha_subito.h"

#include <algorithm>
#include <cstring>

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

namespace {

// Key parts a keypart_map names (HA_WHOLE_KEY: all of them, the extended
// ones too when the optimizer uses them, as calculate_key_len counts).
uint PartsOf(TABLE* table, uint key, key_part_map map) {
  return std::min<uint>(my_count_bits(map), table->actual_n_key_parts(&table->key_info[key]));
}

}  // namespace

int ha_subito::OpenCursor(uint32_t engine_index) {
  subito::Transaction* txn = Txn();
  if (txn == nullptr) return HA_ERR_INTERNAL_ERROR;
  subito::Result<std::unique_ptr<subito::Cursor>> c =
      txn->OpenCursor(EngineTable(), engine_index, read_mode_);
  if (!c.ok()) return Error(c.status());
  cursor_ = std::move(*c);
  keys_only_ = false;
  cursor_has_end_ = false;
  if (semi_consistent_) cursor_->SetSemiConsistent(true);
  return 0;
}

void ha_subito::SyncKeysOnly() {
  // keyread_enabled(): keyread, and so active_index, is a key (< MAX_KEY).
  const bool want = keyread_enabled() && keyread == active_index &&
                    active_index < keys_reversible_.size() && keys_reversible_[active_index] &&
                    read_mode_ == subito::ReadMode::kSnapshot && !mbr_search_;
  if (cursor_ && want != keys_only_) {
    cursor_->SetKeysOnly(want);
    keys_only_ = want;
  }
}

bool ha_subito::EndIsSeekKey(const uchar* key, key_part_map keypart_map) const {
  if (end_range == nullptr || end_range->flag == HA_READ_BEFORE_KEY ||
      end_range->keypart_map != keypart_map) {
    return false;
  }
  const KEY& ki = table->key_info[active_index];
  const uint parts = PartsOf(table, active_index, keypart_map);
  uint length = 0;
  for (uint p = 0; p < parts; ++p) length += ki.key_part[p].store_length;
  return length == end_range->length && std::memcmp(end_range->key, key, length) == 0;
}

int ha_subito::SyncEnd(bool end_is_key) {
  if (!cursor_) return 0;
  if (end_range == nullptr || read_mode_ == subito::ReadMode::kSnapshot || mbr_search_ ||
      end_is_key) {
    if (cursor_has_end_) cursor_->SetEnd(std::nullopt, false);
    cursor_has_end_ = false;
    return 0;
  }
  const std::string_view key(reinterpret_cast<const char*>(end_range->key), end_range->length);
  if (cursor_has_end_ && end_flag_ == end_range->flag && end_map_ == end_range->keypart_map &&
      key == end_key_) {
    return 0;
  }
  const KEY& ki = table->key_info[active_index];
  const uint parts = PartsOf(table, active_index, end_range->keypart_map);
  const subito::mariadb::KeyLayout& own = share_->layout->key(active_index);
  // The images of a NO PAD part of a table created before their weight
  // length suffix (PartLayout::nopad_ties) do not tell 'a' from 'a'
  // followed by NUL, which the server's comparison does: an exclusive end
  // there is taken as inclusive, so no such row is cut off (the server then
  // compares it and ends the read itself).
  // Extended parts are primary key parts (KEY::ext_key_part_map).
  bool no_pad = false;
  for (uint p = 0; p < parts && p < own.parts.size(); ++p) {
    no_pad = no_pad || own.parts[p].nopad_ties;
  }
  const uint own_parts = static_cast<uint>(own.parts.size());
  for (uint p = own_parts; p < parts; ++p) {
    const subito::mariadb::KeyLayout& pk = share_->layout->key(table->s->primary_key);
    no_pad =
        no_pad || pk.parts[subito::mariadb::PrimaryPartOfExtended(ki, p - own_parts)].nopad_ties;
  }
  Row prefix;
  mapper_->KeyPrefix(active_index, end_range->key, parts, &prefix);
  subito::Result<std::string> end = cursor_->EncodeKey(prefix);
  if (!end.ok()) return Error(end.status());
  cursor_->SetEnd(std::move(*end), end_range->flag != HA_READ_BEFORE_KEY || no_pad);
  cursor_has_end_ = true;
  end_flag_ = end_range->flag;
  end_map_ = end_range->keypart_map;
  end_key_.assign(key);
  return 0;
}

int ha_subito::ReadCurrent(uchar* buf, int end) {
  if (!cursor_ || !cursor_->Valid()) return end;
  const subito::ValueView record = cursor_->column(share_->layout->record_column());
  if (keys_only_ && std::holds_alternative<std::monostate>(record)) {
    // An entry without its row (SyncKeysOnly): its key's fields only.
    Status st = mapper_->FromImages(active_index, *cursor_, buf);
    if (!st.ok()) return Error(st);
  } else if (!std::holds_alternative<std::string_view>(record)) {
    return Error(Status::Corruption("row without a record"));
  } else if (int err = FillRecord(std::get<std::string_view>(record), buf)) {
    return err;
  }
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
  Status st = mapper_->FromRecord(packed, buf, table->s->blob_fields ? &row_storage_ : nullptr,
                                  FieldsToFill(buf));
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

// InnoDB's rule (ha_innobase::build_template): a read that may write (an
// exclusive lock: UPDATE, DELETE, SELECT ... FOR UPDATE, a write
// statement's own reads) takes the whole row, and so does a read into
// another buffer than record[0] (a duplicate's, for REPLACE and ON
// DUPLICATE KEY UPDATE) or of a table with virtual columns; any other read
// fills the fields the statement reads or writes. Here: up to the last of
// them and of the active index's and primary key's parts (the server
// compares a range's end on the record).
uint ha_subito::FieldsToFill(const uchar* buf) const {
  const uint n = table->s->fields;
  if (buf != table->record[0] || table->vfield || lock_type_ >= TL_FIRST_WRITE ||
      read_mode_ == subito::ReadMode::kExclusive ||
      read_mode_ == subito::ReadMode::kExclusiveSkipLocked) {
    return n;
  }
  uint fill = 0;
  const auto key_parts = [&](uint k) {
    if (k >= table->s->keys) return;
    const KEY& key = table->key_info[k];
    for (uint p = 0; p < key.user_defined_key_parts; ++p) {
      fill = std::max(fill, static_cast<uint>(key.key_part[p].fieldnr));  // 1-based
    }
  };
  key_parts(active_index);
  key_parts(table->s->primary_key);
  for (uint i = n; i > fill; --i) {
    if (bitmap_is_set(table->read_set, i - 1) || bitmap_is_set(table->write_set, i - 1)) return i;
  }
  return fill;
}

const std::vector<uint32_t>& ha_subito::EntryColumns() const {
  return active_index != MAX_KEY ? share_->layout->key(active_index).entry_columns
                                 : share_->layout->def().primary_key;
}

int ha_subito::EnsureCursor(bool end_is_key) {
  if (!cursor_) {
    if (int err = OpenCursor(
            active_index != MAX_KEY ? share_->layout->key(active_index).engine_index : 0)) {
      return err;
    }
  }
  SyncKeysOnly();
  return SyncEnd(end_is_key);
}

void ha_subito::ForgetLastEntry() {
  has_last_key_ = false;
  last_entry_.clear();
  last_was_miss_ = false;
}

int ha_subito::Reposition(bool forward) {
  if (!has_last_key_ && last_entry_.empty()) return HA_ERR_END_OF_FILE;
  if (int err = EnsureCursor()) return err;
  cursor_bounded_ = false;
  const SeekOp op = !forward ? SeekOp::kLT : last_was_miss_ ? SeekOp::kGE : SeekOp::kGT;
  Status st = has_last_key_ ? cursor_->SeekKey(op, last_key_) : cursor_->Seek(op, last_entry_);
  return st.ok() ? 0 : Error(st);
}

int ha_subito::rnd_init(bool) {
  return Guard(ha_thd(), "rnd_init", [&]() -> int {
    scan_started_ = false;
    cursor_bounded_ = false;
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
    mapper_->KeyOfRecord(table->s->primary_key, record, &ref_values_);
    mapper_->RefOf(ref_values_, ref);
    return 0;
  });
}

void ha_subito::unlock_row() {
  // The row the server just read does not match its condition: at READ
  // COMMITTED (no ranges locked) its lock goes, as InnoDB's row_unlock
  // (a read through the primary key only: Cursor::ReleaseCurrentLocks).
  (void)Guard(ha_thd(), "unlock_row", [&]() -> int {
    if (cursor_ && cursor_->Valid() && read_mode_ != subito::ReadMode::kSnapshot &&
        thd_tx_isolation(ha_thd()) <= ISO_READ_COMMITTED) {
      cursor_->ReleaseCurrentLocks();
    }
    return 0;
  });
}

void ha_subito::try_semi_consistent_read(bool yes) {
  // As InnoDB: at READ COMMITTED and below only (no ranges are locked).
  semi_consistent_ = yes && thd_tx_isolation(ha_thd()) <= ISO_READ_COMMITTED;
  if (cursor_) cursor_->SetSemiConsistent(semi_consistent_);
}

bool ha_subito::was_semi_consistent_read() {
  return cursor_ && cursor_->WasSemiConsistent();
}

int ha_subito::cmp_ref(const uchar* ref1, const uchar* ref2) {
  // In the engine's order of rows: index merge's ROR scans merge rows by
  // it (is_key_scan_ror). A hidden row id is stored little-endian; a DESC
  // primary key part orders its images backwards.
  const TableLayout& layout = *share_->layout;
  if (layout.hidden_pk()) {
    const ulonglong a = uint8korr(ref1), b = uint8korr(ref2);
    return a < b ? -1 : a > b ? 1 : 0;
  }
  const uint pk = table->s->primary_key;
  const KEY& key = table->key_info[pk];
  const std::vector<subito::mariadb::PartLayout>& parts = layout.key(pk).parts;
  for (size_t i = 0; i < parts.size(); ++i) {
    const uint32_t n = parts[i].image_len;
    if (int c = std::memcmp(ref1, ref2, n)) {
      return (key.key_part[i].key_part_flag & HA_REVERSE_SORT) ? -c : c;
    }
    ref1 += n;
    ref2 += n;
  }
  return 0;
}

int ha_subito::rnd_pos(uchar* buf, uchar* pos) {
  return Guard(ha_thd(), "rnd_pos", [&]() -> int {
    mapper_->KeyOfRef(pos, &ref_values_);
    subito::Transaction* txn = Txn();
    if (txn == nullptr) return HA_ERR_INTERNAL_ERROR;
    subito::Result<std::optional<Row>> r = txn->Get(EngineTable(), ref_values_, read_mode_);
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
    cursor_bounded_ = false;
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

int ha_subito::Seek(uchar* buf, SeekOp op, bool must_match, bool exact, bool end_is_key) {
  if (int err = EnsureCursor(end_is_key)) return err;
  if (int err = EncodeSearchKey()) return err;
  cursor_bounded_ = exact && read_mode_ != subito::ReadMode::kSnapshot;
  const SeekOp engine_op = !cursor_bounded_    ? op
                           : op == SeekOp::kGE ? SeekOp::kEq
                                               : SeekOp::kEqLast;
  Status st = cursor_->SeekKey(engine_op, search_key_);
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
    const uint parts = PartsOf(table, active_index, keypart_map);
    mapper_->KeyPrefix(active_index, key, parts, &search_prefix_);
    bounded_ = false;
    switch (find_flag) {
      case HA_READ_KEY_EXACT:  // InnoDB's ROW_SEL_EXACT; HA_READ_PREFIX is its match mode 0
      case HA_READ_PREFIX:
        bounded_ = true;
        return Seek(buf, SeekOp::kGE, true, find_flag == HA_READ_KEY_EXACT,
                    find_flag == HA_READ_KEY_EXACT && EndIsSeekKey(key, keypart_map));
      case HA_READ_KEY_OR_NEXT:
        return Seek(buf, SeekOp::kGE, false);
      case HA_READ_AFTER_KEY:
        return Seek(buf, SeekOp::kGT, false);
      case HA_READ_BEFORE_KEY:
        return Seek(buf, SeekOp::kLT, false);
      case HA_READ_KEY_OR_PREV:
      case HA_READ_PREFIX_LAST_OR_PREV:
        return Seek(buf, SeekOp::kLE, false);
      case HA_READ_PREFIX_LAST:  // ROW_SEL_EXACT_PREFIX
        bounded_ = true;
        return Seek(buf, SeekOp::kLE, true, true);
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
  cursor_bounded_ = false;
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
  // A row read semi-consistently is read again by the cursor itself.
  if (!cursor_ || last_was_miss_ ||
      (cursor_bounded_ && cursor_->Valid() && !cursor_->WasSemiConsistent())) {
    if (int err = Reposition(forward)) return err;
    return ReadCurrent(buf, HA_ERR_END_OF_FILE);
  }
  if (!cursor_->Valid()) return HA_ERR_END_OF_FILE;
  SyncKeysOnly();
  if (int err = SyncEnd()) return err;
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
    cursor_bounded_ = false;
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
    cursor_bounded_ = false;
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
      const uint parts = table->actual_n_key_parts(&table->key_info[active_index]);
      while (n < parts && len < keylen) len += ki.key_part[n++].store_length;
      mapper_->KeyPrefix(active_index, key, n, &search_prefix_);
      if (int err = EncodeSearchKey()) return err;
      bounded_ = true;
    }
    SyncKeysOnly();
    if (int err = SyncEnd()) return err;
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
      mapper_->KeyPrefix(inx, min_key->key, PartsOf(table, inx, min_key->keypart_map), &lo->prefix);
      lo->inclusive = min_key->flag != HA_READ_AFTER_KEY;
    }
    if (max_key) {
      hi.emplace();
      mapper_->KeyPrefix(inx, max_key->key, PartsOf(table, inx, max_key->keypart_map), &hi->prefix);
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
  const auto current = [rows](uint64_t last) {
    return last != subito::mariadb::SubitoShare::kNoEstimate && rows < last * 11 / 10 + 16 &&
           rows + last / 10 + 16 > last;
  };
  // Without the share's mutex first: every statement asks.
  if (!force && current(share_->rec_per_key_rows.load(std::memory_order_relaxed))) return;
  {
    std::lock_guard<std::mutex> g(share_->mu);
    if (!force && current(share_->rec_per_key_rows.load(std::memory_order_relaxed))) return;
    share_->rec_per_key_rows.store(rows, std::memory_order_relaxed);
  }
  for (uint k = 0; k < table->s->keys; ++k) {
    KEY& key = table->key_info[k];
    subito::Result<std::vector<double>> per_key =
        EngineTable()->EstimateEntriesPerKey(share_->layout->key(k).engine_index);
    if (!per_key.ok()) continue;
    auto entries = [&](size_t engine_part) {
      return engine_part < per_key->size()
                 ? static_cast<ulong>(std::max(1.0, (*per_key)[engine_part] + 0.5))
                 : ulong{1};
    };
    const uint own = key.user_defined_key_parts;
    for (uint p = 0; p < own; ++p) key.rec_per_key[p] = entries(p);
    if (key.flags & HA_NOSAME) key.rec_per_key[own - 1] = 1;
    // Extended part p (primary key part j) ends the engine prefix of
    // own + j + 1 columns.
    for (uint p = own; p < key.ext_key_parts; ++p) {
      key.rec_per_key[p] = entries(own + subito::mariadb::PrimaryPartOfExtended(key, p - own));
    }
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
