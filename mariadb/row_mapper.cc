#include "row_mapper.h"

#include <my_global.h>
// clang-format off: the server's headers depend on this order
#include "field.h"
#include "key.h"
#include "sql_class.h"
#include "table.h"
// clang-format on

#include <cstring>

namespace subito::mariadb {
namespace {

bool IsBinary(const Field* f) {
  return f->charset() == &my_charset_bin;
}

// A VARCHAR or TEXT part whose sort key ties strings the collation tells
// apart (PartLayout::weight_length_suffix): a NO PAD collation that pads
// its weights with zeros and weighs some character zero. Not UCA ones: they
// pad with a weight below every primary weight (and compare only the first
// level without padding), so their sort keys order as they compare; not
// tis620's, which compares as C strings ('a' and 'a' followed by NUL are
// equal there).
bool NoPadCollated(const Field* f) {
  const CHARSET_INFO* cs = f->charset();
  switch (f->real_type()) {
    case MYSQL_TYPE_VARCHAR:
    case MYSQL_TYPE_TINY_BLOB:
    case MYSQL_TYPE_MEDIUM_BLOB:
    case MYSQL_TYPE_LONG_BLOB:
    case MYSQL_TYPE_BLOB:
      return !IsBinary(f) && (cs->state & MY_CS_NOPAD) && f->cmp_type() == STRING_RESULT &&
             cs->uca == nullptr && std::strcmp(cs->cs_name.str, "tis620") != 0;
    default:
      return false;
  }
}

constexpr uint32_t kWeightLengthBytes = 2;

// Ends `image` with the length of the weights of `str` without their
// padding, big-endian; the bytes before it hold the padded sort key.
void StoreWeightLength(const CHARSET_INFO* cs, uint nweights, const uchar* str, size_t len,
                       std::string* scratch, std::string* image) {
  const size_t room = image->size() - kWeightLengthBytes;
  scratch->resize(room);
  const size_t weights =
      cs->strnxfrm(reinterpret_cast<uchar*>(scratch->data()), room, nweights, str, len, 0);
  (*image)[room] = static_cast<char>(weights >> 8);
  (*image)[room + 1] = static_cast<char>(weights & 0xFF);
}

// Bytes of Field::sort_string for one key part (see table_layout.h).
uint32_t ImageLength(const KEY_PART_INFO& kp) {
  const Field* f = kp.field;
  const CHARSET_INFO* cs = f->charset();
  switch (f->real_type()) {
    case MYSQL_TYPE_VARCHAR:
      if (IsBinary(f)) return kp.length + static_cast<const Field_varstring*>(f)->length_bytes;
      return static_cast<uint32_t>(cs->strnxfrmlen(kp.length));
    case MYSQL_TYPE_STRING:
      return static_cast<uint32_t>(cs->strnxfrmlen(kp.length));
    case MYSQL_TYPE_TINY_BLOB:
    case MYSQL_TYPE_MEDIUM_BLOB:
    case MYSQL_TYPE_LONG_BLOB:
    case MYSQL_TYPE_BLOB:
      if (IsBinary(f)) return kp.length + static_cast<const Field_blob*>(f)->pack_length_no_ptr();
      return static_cast<uint32_t>(cs->strnxfrmlen(kp.length));
    default:
      return kp.length;
  }
}

// Upper bound of an image's encoded size in an engine key: every byte may
// be a 0x00 that the binary-string encoding doubles, plus its terminator
// and a null flag.
uint32_t EncodedBound(uint32_t image_len) {
  return 2 * image_len + 3;
}

// BTree::max_record() less the overflow reference, for a page size.
uint32_t EngineKeyLimit(uint32_t page_size) {
  return page_size / 4 - 8 - 9;
}  // BTree::max_record() - overflow ref, 16 KiB pages

}  // namespace

Result<TableLayout> TableLayout::Build(const TABLE_SHARE* share, const std::string& name,
                                       uint32_t page_size, const TableDef* stored) {
  TableLayout l;
  l.def_.name = name;
  const bool has_pk = share->primary_key != MAX_KEY;
  l.keys_.resize(share->keys);
  for (uint k = 0; k < share->keys; ++k) {
    const KEY& key = share->key_info[k];
    if (key.flags & HA_FULLTEXT) {
      return Status::NotSupported("Subito does not support FULLTEXT indexes (index " +
                                  std::string(key.name.str) + ")");
    }
    if (key.algorithm == HA_KEY_ALG_LONG_HASH) {
      return Status::NotSupported(
          "Subito does not support UNIQUE on whole BLOB/TEXT columns "
          "(index " +
          std::string(key.name.str) + "); index a prefix instead");
    }
    KeyLayout& kl = l.keys_[k];
    kl.engine_index = has_pk ? k : k + 1;
    kl.spatial = key.flags & HA_SPATIAL;
    for (uint p = 0; p < key.user_defined_key_parts; ++p) {
      const KEY_PART_INFO& kp = key.key_part[p];
      PartLayout pl;
      pl.column = static_cast<uint32_t>(l.def_.columns.size());
      pl.image_len = ImageLength(kp);
      pl.nullable = kp.field->real_maybe_null();
      if (NoPadCollated(kp.field) && !(key.flags & HA_SPATIAL)) {
        const Column* old = stored != nullptr && l.def_.columns.size() < stored->columns.size()
                                ? &stored->columns[l.def_.columns.size()]
                                : nullptr;
        pl.nopad_ties = old != nullptr && old->max_length == pl.image_len;
        pl.weight_length_suffix = !pl.nopad_ties;
        if (pl.weight_length_suffix) pl.image_len += kWeightLengthBytes;
      }
      Column c;
      c.name = "k" + std::to_string(k) + "p" + std::to_string(p);
      c.type = ColumnType::kString;
      c.nullable = pl.nullable;
      c.max_length = pl.image_len;
      c.descending = kp.key_part_flag & HA_REVERSE_SORT;
      l.def_.columns.push_back(std::move(c));
      kl.parts.push_back(pl);
    }
  }
  if (!has_pk) {
    l.hidden_pk_ = true;
    l.row_id_column_ = static_cast<uint32_t>(l.def_.columns.size());
    l.def_.columns.push_back({"__row_id", ColumnType::kUInt, 8, false, 0});
    l.def_.primary_key = {l.row_id_column_};
    l.def_.auto_increment_column = static_cast<int>(l.row_id_column_);
    l.ref_length_ = 8;
  } else {
    for (const PartLayout& p : l.keys_[share->primary_key].parts) {
      l.def_.primary_key.push_back(p.column);
      l.ref_length_ += p.image_len;
    }
  }
  for (KeyLayout& kl : l.keys_) {
    for (const PartLayout& p : kl.parts) kl.entry_columns.push_back(p.column);
    if (kl.engine_index != 0) {
      for (uint32_t c : l.def_.primary_key) kl.entry_columns.push_back(c);
    }
  }
  l.record_column_ = static_cast<uint32_t>(l.def_.columns.size());
  l.def_.columns.push_back({"__record", ColumnType::kString, 0, false, 0xFFFFFFFFu});

  uint32_t pk_bound = l.hidden_pk_ ? 9 : 0;
  if (has_pk) {
    for (const PartLayout& p : l.keys_[share->primary_key].parts)
      pk_bound += EncodedBound(p.image_len);
  }
  for (uint k = 0; k < share->keys; ++k) {
    const KEY& key = share->key_info[k];
    uint32_t bound = pk_bound;
    if (k != share->primary_key) {
      for (const PartLayout& p : l.keys_[k].parts) bound += EncodedBound(p.image_len);
      IndexDef ix;
      ix.name = key.name.str;
      ix.unique = key.flags & HA_NOSAME;
      for (const PartLayout& p : l.keys_[k].parts) ix.columns.push_back(p.column);
      l.def_.indexes.push_back(std::move(ix));
    }
    if (bound > EngineKeyLimit(page_size)) {
      return Status::NotSupported("index " + std::string(key.name.str) +
                                  " is too long for Subito: its sort key (with the primary "
                                  "key) may take " +
                                  std::to_string(bound) + " bytes, the limit is " +
                                  std::to_string(EngineKeyLimit(page_size)) +
                                  "; use shorter prefixes");
    }
  }
  return l;
}

uint32_t TableLayout::mariadb_key(uint32_t engine_index) const {
  for (uint32_t k = 0; k < keys_.size(); ++k) {
    if (keys_[k].engine_index == engine_index) return k;
  }
  return MAX_KEY;
}

RowMapper::RowMapper(TABLE* table, const TableLayout* layout)
    : table_(table),
      layout_(layout),
      scratch_record_(table->s->rec_buff_length),
      tuple_(MAX_KEY_LENGTH + MAX_REF_PARTS * 4) {}

namespace {

bool Reversible(const KEY_PART_INFO& kp) {
  const Field* f = kp.field;
  if (f->vcol_info != nullptr || kp.length != f->pack_length()) return false;
  switch (f->real_type()) {
    case MYSQL_TYPE_TINY:
    case MYSQL_TYPE_SHORT:
    case MYSQL_TYPE_INT24:
    case MYSQL_TYPE_LONG:
    case MYSQL_TYPE_LONGLONG:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool RowMapper::ImagesReversible(uint32_t key) const {
  const TABLE_SHARE* s = table_->s;
  if (key >= s->keys || key == s->primary_key || layout_->key(key).spatial) return false;
  const KEY& k = table_->key_info[key];
  for (uint i = 0; i < k.user_defined_key_parts; ++i) {
    if (!Reversible(k.key_part[i])) return false;
  }
  if (s->primary_key == MAX_KEY) return true;
  const KEY& pk = table_->key_info[s->primary_key];
  for (uint i = 0; i < pk.user_defined_key_parts; ++i) {
    if (!Reversible(pk.key_part[i])) return false;
  }
  return true;
}

Status RowMapper::FromImages(uint32_t key, const Cursor& entry, unsigned char* record) const {
  const my_ptrdiff_t off = record - table_->record[0];
  auto fill = [&](const KEY_PART_INFO& kp, uint32_t column) {
    Field* f = kp.field;
    const ValueView v = entry.column(column);
    if (std::holds_alternative<std::monostate>(v)) {
      f->set_null(off);
      return Status::OK();
    }
    const uint32_t n = f->pack_length();
    const auto* image = std::get_if<std::string_view>(&v);
    if (image == nullptr || image->size() != n) {
      return Status::Corruption("index entry of " + layout_->def().name + ": the image of " +
                                f->field_name.str + " is not of its column's length");
    }
    f->set_notnull(off);
    uchar* to = f->ptr + off;
    for (uint32_t i = 0; i < n; ++i) to[i] = static_cast<uchar>((*image)[n - 1 - i]);
    if (!(f->flags & UNSIGNED_FLAG)) to[n - 1] ^= 0x80;
    return Status::OK();
  };
  const KEY& k = table_->key_info[key];
  for (uint i = 0; i < k.user_defined_key_parts; ++i) {
    SUBITO_RETURN_IF_ERROR(fill(k.key_part[i], layout_->key(key).parts[i].column));
  }
  const uint pk = table_->s->primary_key;
  if (pk == MAX_KEY) return Status::OK();
  for (uint i = 0; i < table_->key_info[pk].user_defined_key_parts; ++i) {
    SUBITO_RETURN_IF_ERROR(
        fill(table_->key_info[pk].key_part[i], layout_->key(pk).parts[i].column));
  }
  return Status::OK();
}

std::string RowMapper::Image(uint32_t key, uint32_t part, const unsigned char* data) {
  const KEY_PART_INFO& kp = table_->key_info[key].key_part[part];
  Field* f = kp.field;
  if (layout_->key(key).spatial) {
    // The server's key image of a SPATIAL part is the geometry's MBR (four
    // doubles): kept as it is, matched by value, never ordered.
    return std::string(reinterpret_cast<const char*>(data), 4 * sizeof(double));
  }
  if (f->flags & BLOB_FLAG) return BlobImage(key, part, data);
  const PartLayout& pl = layout_->key(key).parts[part];
  const my_ptrdiff_t diff = scratch_record_.data() - table_->record[0];
  std::string image(pl.image_len, '\0');
  const uint32_t suffix = pl.weight_length_suffix ? kWeightLengthBytes : 0;
  f->move_field_offset(diff);
  f->set_notnull();
  // A range's end key may hold more characters than the column (LIKE 'a%'
  // pads with the collation's largest character): cutting it is no error of
  // the statement's, so no warning may reach a strict-mode UPDATE.
  Check_level_instant_set quiet(current_thd, CHECK_FIELD_IGNORE);
  f->set_key_image(data, kp.length);
  f->sort_string(reinterpret_cast<uchar*>(image.data()), static_cast<uint>(image.size() - suffix));
  if (suffix != 0) {
    String value;
    f->val_str(&value, &value);
    StoreWeightLength(f->charset(), f->char_length() * f->charset()->strxfrm_multiply,
                      reinterpret_cast<const uchar*>(value.ptr()), value.length(), &weights_,
                      &image);
  }
  f->move_field_offset(-diff);
  return image;
}

std::string RowMapper::BlobImage(uint32_t key, uint32_t part, const unsigned char* data) {
  // Field_blob::sort_string, from the key tuple's bytes: set_key_image would
  // store into the field's own value buffer, which record[0] may point to.
  const KEY_PART_INFO& kp = table_->key_info[key].key_part[part];
  const PartLayout& pl = layout_->key(key).parts[part];
  const Field* f = kp.field;
  const CHARSET_INFO* cs = f->charset();
  const uint32_t len = uint2korr(data);
  const unsigned char* bytes = data + HA_KEY_BLOB_LENGTH;
  std::string image(pl.image_len, '\0');
  uchar* to = reinterpret_cast<uchar*>(image.data());
  size_t length = image.size();
  if (pl.weight_length_suffix) {
    length -= kWeightLengthBytes;
    StoreWeightLength(cs, static_cast<uint>(length), bytes, len, &weights_, &image);
  }
  if (len == 0 && cs->pad_char == 0) return image;
  if (IsBinary(f)) {
    const uint packlength = static_cast<const Field_blob*>(f)->pack_length_no_ptr();
    length -= packlength;
    for (uint i = 0; i < packlength; ++i)
      to[length + i] = static_cast<uchar>(len >> (8 * (packlength - 1 - i)));
  }
  cs->strnxfrm(to, length, static_cast<uint>(length), bytes, len,
               MY_STRXFRM_PAD_WITH_SPACE | MY_STRXFRM_PAD_TO_MAXLEN);
  return image;
}

void RowMapper::TupleToValues(uint32_t key, const unsigned char* tuple, uint32_t parts, Row* out) {
  const KEY& ki = table_->key_info[key];
  const unsigned char* p = tuple;
  for (uint32_t i = 0; i < parts; ++i) {
    const KEY_PART_INFO& kp = ki.key_part[i];
    const unsigned char* data = p;
    bool null = false;
    if (kp.null_bit) {
      null = *data != 0;
      ++data;
    }
    if (null) {
      (*out)[i] = std::monostate{};
    } else {
      (*out)[i] = Image(key, i, data);
    }
    p += kp.store_length;
  }
}

uint32_t PrimaryPartOfExtended(const KEY& key, uint32_t n) {
  for (uint32_t j = 0;; ++j) {
    if ((key.ext_key_part_map & (key_part_map{1} << j)) && n-- == 0) return j;
  }
}

void RowMapper::KeyPrefix(uint32_t key, const unsigned char* tuple, uint32_t parts, Row* prefix) {
  const KEY& ki = table_->key_info[key];
  const uint32_t own = std::min<uint32_t>(parts, ki.user_defined_key_parts);
  prefix->assign(own, std::monostate{});
  TupleToValues(key, tuple, own, prefix);
  if (parts == own) return;
  // Extended key parts (HTON_SUPPORTS_EXTENDED_KEYS): the primary key's
  // parts that are not among the key's own, in the primary key's order
  // (ext_key_part_map), as the engine's entry ends with every primary key
  // column. A part the server left out is a whole column the key has (the
  // server extends only keys of whole columns, by whole primary key
  // columns): its value is that part's.
  const uint pk = table_->s->primary_key;
  const KEY& pki = table_->key_info[pk];
  const unsigned char* p = tuple;
  for (uint32_t i = 0; i < own; ++i) p += ki.key_part[i].store_length;
  uint32_t ext = own;
  for (uint j = 0; j < pki.user_defined_key_parts && ext < parts; ++j) {
    if (ki.ext_key_part_map & (key_part_map{1} << j)) {
      const KEY_PART_INFO& kp = ki.key_part[ext];
      const bool null = kp.null_bit && *p != 0;
      prefix->push_back(null ? Value{} : Value{Image(pk, j, p + (kp.null_bit ? 1 : 0))});
      p += kp.store_length;
      ++ext;
      continue;
    }
    uint32_t i = 0;
    while (i < own && ki.key_part[i].fieldnr != pki.key_part[j].fieldnr) ++i;
    // Not among the parts given (a shorter tuple names no later part).
    if (i == own) return;
    Value same = (*prefix)[i];
    prefix->push_back(std::move(same));
  }
}

void RowMapper::KeyOfRecord(uint32_t key, const unsigned char* record, Row* values) {
  const KEY& ki = table_->key_info[key];
  key_copy(tuple_.data(), record, &ki, 0);
  const my_ptrdiff_t diff = record - table_->record[0];
  if (diff != 0) {
    // Field_bit::get_key_image copies the field's bytes from record[0]
    // whatever record it is given (10.11): copy BIT parts again with the
    // field on `record`.
    unsigned char* part = tuple_.data();
    for (uint p = 0; p < ki.user_defined_key_parts; part += ki.key_part[p++].store_length) {
      const KEY_PART_INFO& kp = ki.key_part[p];
      Field* f = kp.field;
      if (f->type() != MYSQL_TYPE_BIT || (kp.null_bit && *part != 0)) continue;
      f->move_field_offset(diff);
      f->get_key_image(part + (kp.null_bit ? 1 : 0), kp.length, f->ptr, Field::itRAW);
      f->move_field_offset(-diff);
    }
  }
  values->assign(ki.user_defined_key_parts, std::monostate{});
  TupleToValues(key, tuple_.data(), ki.user_defined_key_parts, values);
}

void RowMapper::ToRow(const unsigned char* record, Row* row) {
  // A row the caller keeps between calls lends its record's bytes.
  const uint32_t record_column = layout_->record_column();
  std::string rec;
  if (record_column < row->size()) {
    if (auto* old = std::get_if<std::string>(&(*row)[record_column])) rec = std::move(*old);
  }
  row->assign(layout_->def().columns.size(), std::monostate{});
  const TABLE_SHARE* s = table_->s;
  for (uint k = 0; k < s->keys; ++k) {
    KeyOfRecord(k, record, &key_values_);
    const KeyLayout& kl = layout_->key(k);
    for (size_t i = 0; i < kl.parts.size(); ++i) {
      (*row)[kl.parts[i].column] = std::move(key_values_[i]);
    }
  }

  // __record: the null bytes, then each stored non-NULL field, packed,
  // into room for them all (one allocation).
  const my_ptrdiff_t diff = record - table_->record[0];
  const auto bound_of = [&](Field* f) -> size_t {
    if (!f->stored_in_db() || f->is_null_in_record(record)) return 0;
    size_t bound = f->pack_length() + 8;
    if (f->flags & BLOB_FLAG) bound += static_cast<Field_blob*>(f)->get_length(f->ptr + diff);
    return bound;
  };
  size_t room = s->null_bytes;
  for (Field** fp = table_->field; *fp; ++fp) room += bound_of(*fp);
  rec.reserve(room);
  rec.assign(reinterpret_cast<const char*>(record), s->null_bytes);
  for (Field** fp = table_->field; *fp; ++fp) {
    Field* f = *fp;
    const size_t bound = bound_of(f);
    if (bound == 0) continue;
    const size_t at = rec.size();
    rec.resize(at + bound);
    uchar* end = f->pack(reinterpret_cast<uchar*>(rec.data()) + at, f->ptr + diff);
    rec.resize(static_cast<size_t>(end - reinterpret_cast<uchar*>(rec.data())));
  }
  (*row)[record_column] = std::move(rec);
}

Status RowMapper::FromRow(const Row& row, unsigned char* record, std::string* storage) {
  const Value& v = row[layout_->record_column()];
  if (!std::holds_alternative<std::string>(v)) return Status::Corruption("row without a record");
  return FromRecord(std::get<std::string>(v), record, storage);
}

Status RowMapper::FromRecord(std::string_view bytes, unsigned char* record, std::string* storage,
                             unsigned fields) {
  if (storage != nullptr) {
    storage->assign(bytes);
    bytes = *storage;
  }
  const TABLE_SHARE* s = table_->s;
  if (bytes.size() < s->null_bytes) return Status::Corruption("record shorter than its null bytes");
  const uchar* from = reinterpret_cast<const uchar*>(bytes.data());
  const uchar* end = from + bytes.size();
  std::memcpy(record, from, s->null_bytes);
  from += s->null_bytes;
  const my_ptrdiff_t diff = record - table_->record[0];
  for (Field** fp = table_->field; *fp; ++fp) {
    Field* f = *fp;
    if (f->field_index >= fields) return Status::OK();
    if (!f->stored_in_db()) continue;
    if (f->is_null_in_record(record)) {
      // A NULL field's bytes are its default's, as InnoDB leaves them: the
      // server compares whole records to count changed rows, so bytes left
      // from an earlier row would make `SET c = NULL` look like a change.
      const my_ptrdiff_t at = f->ptr - table_->record[0];
      std::memcpy(record + at, s->default_values + at, f->pack_length_in_rec());
      continue;
    }
    // Field_blob::unpack writes its pointer at f->ptr whatever `to` says:
    // move the field onto this record for the call.
    f->move_field_offset(diff);
    from = f->unpack(f->ptr, from, end, 0);
    f->move_field_offset(-diff);
    if (from == nullptr || from > end) {
      return Status::Corruption(std::string("record field ") + f->field_name.str + " is damaged");
    }
  }
  if (from != end) return Status::Corruption("record has trailing bytes");
  return Status::OK();
}

void RowMapper::RefOf(const Row& key, unsigned char* ref) const {
  for (const Value& v : key) {
    const std::string& image = std::get<std::string>(v);
    std::memcpy(ref, image.data(), image.size());
    ref += image.size();
  }
}

void RowMapper::KeyOfRef(const unsigned char* ref, Row* key) const {
  key->clear();
  if (layout_->hidden_pk()) {
    key->push_back(static_cast<uint64_t>(uint8korr(ref)));
    return;
  }
  for (const PartLayout& p : layout_->key(table_->s->primary_key).parts) {
    key->push_back(std::string(reinterpret_cast<const char*>(ref), p.image_len));
    ref += p.image_len;
  }
}

}  // namespace subito::mariadb
