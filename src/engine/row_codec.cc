#include "engine/row_codec.h"

#include <set>
#include <span>
#include <type_traits>

#include "btree/key_encoding.h"
#include "util/strings.h"

namespace subito::engine {
namespace {

bool IsInt(ColumnType t) {
  return t == ColumnType::kInt || t == ColumnType::kUInt;
}

Status CheckColumnList(const TableDef& def, const std::vector<uint32_t>& cols, const char* what) {
  if (cols.empty()) return Status::InvalidArgument(StrFormat("%s has no columns", what));
  std::set<uint32_t> seen;
  for (uint32_t c : cols) {
    if (c >= def.columns.size()) {
      return Status::InvalidArgument(
          StrFormat("%s names column %u of %zu", what, c, def.columns.size()));
    }
    if (!seen.insert(c).second) {
      return Status::InvalidArgument(
          StrFormat("%s names column %s twice", what, def.columns[c].name.c_str()));
    }
  }
  return Status::OK();
}

// Canonical value of one column, or InvalidArgument.
Result<Value> CanonicalValue(const Column& c, const Value& v) {
  if (std::holds_alternative<std::monostate>(v)) {
    if (!c.nullable) return Status::InvalidArgument("column " + c.name + " cannot be NULL");
    return v;
  }
  const int bits = 8 * c.width;
  if (c.type == ColumnType::kString) {
    if (!std::holds_alternative<std::string>(v)) {
      return Status::InvalidArgument("column " + c.name + " takes a string");
    }
    if (std::get<std::string>(v).size() > c.max_length) {
      return Status::InvalidArgument(StrFormat("column %s: %zu bytes exceed its %u", c.name.c_str(),
                                               std::get<std::string>(v).size(), c.max_length));
    }
    return v;
  }
  if (std::holds_alternative<std::string>(v)) {
    return Status::InvalidArgument("column " + c.name + " takes an integer");
  }
  const bool neg = std::holds_alternative<int64_t>(v) && std::get<int64_t>(v) < 0;
  if (c.type == ColumnType::kUInt) {
    if (neg) return Status::InvalidArgument("column " + c.name + " is unsigned");
    const uint64_t u = std::holds_alternative<uint64_t>(v)
                           ? std::get<uint64_t>(v)
                           : static_cast<uint64_t>(std::get<int64_t>(v));
    if (bits < 64 && u >> bits != 0) {
      return Status::InvalidArgument("column " + c.name + ": value out of range");
    }
    return Value(u);
  }
  if (std::holds_alternative<uint64_t>(v) && std::get<uint64_t>(v) > uint64_t{INT64_MAX}) {
    return Status::InvalidArgument("column " + c.name + ": value out of range");
  }
  const int64_t s = std::holds_alternative<int64_t>(v)
                        ? std::get<int64_t>(v)
                        : static_cast<int64_t>(std::get<uint64_t>(v));
  if (bits < 64 && (s < -(int64_t{1} << (bits - 1)) || s >= (int64_t{1} << (bits - 1)))) {
    return Status::InvalidArgument("column " + c.name + ": value out of range");
  }
  return Value(s);
}

void EncodeAscending(btree::KeyEncoder& e, const Column& c, const Value& v) {
  if (c.nullable) {
    if (std::holds_alternative<std::monostate>(v)) {
      e.Null();
      return;
    }
    e.NotNull();
  }
  switch (c.type) {
    case ColumnType::kInt:
      e.Signed(std::get<int64_t>(v), c.width);
      break;
    case ColumnType::kUInt:
      e.Unsigned(std::get<uint64_t>(v), c.width);
      break;
    case ColumnType::kString:
      e.Bytes(std::get<std::string>(v));
      break;
  }
}

void EncodePart(btree::KeyEncoder& e, const Column& c, const Value& v) {
  const size_t from = e.size();
  EncodeAscending(e, c, v);
  if (c.descending) e.Invert(from);
}

// The encoded size of a part without escapes (a NULL marker, an integer's
// width or a string and its terminator): one allocation for most keys.
size_t PartSizeHint(const Column& c, const Value& v) {
  const size_t marker = c.nullable ? 1 : 0;
  if (const auto* s = std::get_if<std::string>(&v)) return marker + s->size() + 2;
  return marker + static_cast<size_t>(c.width);
}

}  // namespace

Status ValidateIndexDef(const TableDef& def, const IndexDef& index) {
  if (index.name.empty() || index.name.size() > 64) {
    return Status::InvalidArgument("an index needs a name of 1..64 bytes");
  }
  return CheckColumnList(def, index.columns, ("index " + index.name).c_str());
}

Status ValidateTableDef(const TableDef& def) {
  if (def.name.empty() || def.name.size() > 192) {
    return Status::InvalidArgument("a table needs a name of 1..192 bytes");
  }
  if (def.columns.empty() || def.columns.size() > 4096) {
    return Status::InvalidArgument("a table needs 1..4096 columns");
  }
  std::set<std::string> names;
  for (const Column& c : def.columns) {
    if (c.name.empty() || !names.insert(c.name).second) {
      return Status::InvalidArgument("column names must be non-empty and distinct");
    }
    if (IsInt(c.type) && (c.width < 1 || c.width > 8)) {
      return Status::InvalidArgument("column " + c.name + ": integer width must be 1..8 bytes");
    }
    if (!IsInt(c.type) && c.type != ColumnType::kString) {
      return Status::InvalidArgument("column " + c.name + ": unknown type");
    }
  }
  SUBITO_RETURN_IF_ERROR(CheckColumnList(def, def.primary_key, "the primary key"));
  for (uint32_t c : def.primary_key) {
    if (def.columns[c].nullable) {
      return Status::InvalidArgument("primary key column " + def.columns[c].name +
                                     " cannot be nullable");
    }
  }
  std::set<std::string> index_names{"PRIMARY"};
  for (const IndexDef& i : def.indexes) {
    SUBITO_RETURN_IF_ERROR(ValidateIndexDef(def, i));
    if (!index_names.insert(i.name).second) {
      return Status::InvalidArgument("index names must be distinct (and not PRIMARY): " + i.name);
    }
  }
  if (def.auto_increment_column >= 0) {
    const auto col = static_cast<uint32_t>(def.auto_increment_column);
    if (col >= def.columns.size() || !IsInt(def.columns[col].type) || def.primary_key[0] != col) {
      return Status::InvalidArgument(
          "the auto-increment column must be an integer and the primary key's first column");
    }
  }
  return Status::OK();
}

Result<Row> CanonicalRow(const TableDef& def, const Row& row) {
  if (row.size() != def.columns.size()) {
    return Status::InvalidArgument(StrFormat("table %s has %zu columns, the row %zu",
                                             def.name.c_str(), def.columns.size(), row.size()));
  }
  Row out;
  out.reserve(row.size());
  for (size_t i = 0; i < row.size(); ++i) {
    Result<Value> v = CanonicalValue(def.columns[i], row[i]);
    if (!v.ok()) return v.status();
    out.push_back(std::move(*v));
  }
  return out;
}

std::vector<uint32_t> KeyColumns(const TableDef& def, uint32_t index) {
  if (index == 0) return def.primary_key;
  std::vector<uint32_t> cols = def.indexes[index - 1].columns;
  cols.insert(cols.end(), def.primary_key.begin(), def.primary_key.end());
  return cols;
}

Result<std::string> EncodeKey(const TableDef& def, const std::vector<uint32_t>& columns,
                              const Row& values) {
  if (values.size() > columns.size()) {
    return Status::InvalidArgument(StrFormat("a key of %zu values for an index of %zu columns",
                                             values.size(), columns.size()));
  }
  btree::KeyEncoder e;
  for (size_t i = 0; i < values.size(); ++i) {
    const Column& c = def.columns[columns[i]];
    Result<Value> v = CanonicalValue(c, values[i]);
    if (!v.ok()) return v.status();
    EncodePart(e, c, *v);
  }
  return e.Release();
}

namespace {

// One key of a canonical row's values in `first`'s columns, then in
// `second`'s, sized in advance (several calls per row change).
std::string ColumnsKey(const TableDef& def, std::span<const uint32_t> first,
                       std::span<const uint32_t> second, const Row& row) {
  btree::KeyEncoder e;
  size_t hint = 0;
  for (std::span<const uint32_t> cols : {first, second}) {
    for (uint32_t c : cols) hint += PartSizeHint(def.columns[c], row[c]);
  }
  e.Reserve(hint);
  for (std::span<const uint32_t> cols : {first, second}) {
    for (uint32_t c : cols) EncodePart(e, def.columns[c], row[c]);
  }
  return e.Release();
}

}  // namespace

std::string RowKey(const TableDef& def, uint32_t index, const Row& row) {
  // KeyColumns' order, without building its vector.
  return ColumnsKey(def,
                    index != 0 ? std::span<const uint32_t>(def.indexes[index - 1].columns)
                               : std::span<const uint32_t>(),
                    def.primary_key, row);
}

std::string OwnColumnsKey(const TableDef& def, uint32_t index, const Row& row) {
  return ColumnsKey(def, def.indexes[index - 1].columns, {}, row);
}

bool SameRowKey(const TableDef& def, uint32_t index, const Row& a, const Row& b) {
  if (index != 0) {
    for (uint32_t c : def.indexes[index - 1].columns) {
      if (a[c] != b[c]) return false;
    }
  }
  for (uint32_t c : def.primary_key) {
    if (a[c] != b[c]) return false;
  }
  return true;
}

bool KeyHasNull(const TableDef& def, uint32_t index, const Row& row) {
  if (index == 0) return false;
  for (uint32_t c : def.indexes[index - 1].columns) {
    if (std::holds_alternative<std::monostate>(row[c])) return true;
  }
  return false;
}

Result<size_t> KeyPrefixLength(const TableDef& def, const std::vector<uint32_t>& columns,
                               std::string_view key, size_t parts, bool* has_null) {
  return DecodeKeyParts(def, columns, key, parts, has_null, nullptr);
}

Result<size_t> DecodeKeyParts(const TableDef& def, const std::vector<uint32_t>& columns,
                              std::string_view key, size_t parts, bool* has_null, Row* out) {
  btree::KeyDecoder d(key);
  if (has_null != nullptr) *has_null = false;
  for (size_t i = 0; i < parts && i < columns.size(); ++i) {
    const Column& c = def.columns[columns[i]];
    Value* v = out != nullptr ? &(*out)[columns[i]] : nullptr;
    d.SetDescending(c.descending);
    if (c.nullable) {
      Result<bool> null = d.IsNull();
      if (!null.ok()) return null.status();
      if (*null) {
        if (has_null != nullptr) *has_null = true;
        if (v != nullptr) *v = std::monostate();
        continue;
      }
    }
    if (c.type == ColumnType::kInt) {
      Result<int64_t> x = d.Signed(c.width);
      if (!x.ok()) return x.status();
      if (v != nullptr) *v = *x;
    } else if (c.type == ColumnType::kUInt) {
      Result<uint64_t> x = d.Unsigned(c.width);
      if (!x.ok()) return x.status();
      if (v != nullptr) *v = *x;
    } else {
      Result<std::string> x = d.Bytes();
      if (!x.ok()) return x.status();
      if (v != nullptr) *v = std::move(*x);
    }
  }
  return d.consumed();
}

namespace {
void PutVarint(std::string& out, uint32_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
}  // namespace

std::string EncodeRow(const TableDef& def, const Row& row) {
  const size_t n = def.columns.size();
  std::string out(1 + (n + 7) / 8, '\0');
  out[0] = static_cast<char>(kRowFormatVersion);
  for (size_t i = 0; i < n; ++i) {
    const Column& c = def.columns[i];
    const Value& v = row[i];
    if (std::holds_alternative<std::monostate>(v)) {
      out[1 + i / 8] = static_cast<char>(out[1 + i / 8] | (1 << (i % 8)));
      continue;
    }
    if (c.type == ColumnType::kString) {
      const std::string& s = std::get<std::string>(v);
      PutVarint(out, static_cast<uint32_t>(s.size()));
      out.append(s);
      continue;
    }
    const uint64_t u = c.type == ColumnType::kInt ? static_cast<uint64_t>(std::get<int64_t>(v))
                                                  : std::get<uint64_t>(v);
    for (int b = 0; b < c.width; ++b) out.push_back(static_cast<char>(u >> (8 * b)));
  }
  return out;
}

Status RowView::Parse(const TableDef& def, std::string_view in) {
  const size_t n = def.columns.size();
  auto bad = [&](const char* what) {
    bytes_ = {};
    spans_.clear();
    return Status::Corruption(
        StrFormat("table %s: row of %zu bytes: %s", def.name.c_str(), in.size(), what));
  };
  if (in.size() < 1 + (n + 7) / 8) return bad("shorter than its null bitmap");
  if (static_cast<uint8_t>(in[0]) != kRowFormatVersion) return bad("unknown row format version");
  size_t pos = 1 + (n + 7) / 8;
  spans_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Column& c = def.columns[i];
    if (static_cast<uint8_t>(in[1 + i / 8]) & (1 << (i % 8))) {
      if (!c.nullable) return bad("NULL in a NOT NULL column");
      spans_[i] = {0, kNull};
      continue;
    }
    uint32_t len = c.width;
    if (c.type == ColumnType::kString) {
      len = 0;
      for (int shift = 0;; shift += 7) {
        if (pos >= in.size() || shift > 28) return bad("bad string length");
        const auto b = static_cast<uint8_t>(in[pos++]);
        len |= uint32_t{b & 0x7fu} << shift;
        if (!(b & 0x80)) break;
      }
      if (len > in.size() - pos) return bad("string past the end");
    } else if (in.size() - pos < len) {
      return bad("integer past the end");
    }
    spans_[i] = {static_cast<uint32_t>(pos), len};
    pos += len;
  }
  if (pos != in.size()) return bad("bytes after the last column");
  bytes_ = in;
  return Status::OK();
}

ValueView RowView::column(const TableDef& def, uint32_t i) const {
  if (i >= spans_.size()) return std::monostate();  // no row parsed (or it failed)
  const Span sp = spans_[i];
  if (sp.len == kNull) return std::monostate();
  const Column& c = def.columns[i];
  if (c.type == ColumnType::kString) return bytes_.substr(sp.off, sp.len);
  uint64_t u = 0;
  for (uint32_t b = 0; b < sp.len; ++b) {
    u |= uint64_t{static_cast<uint8_t>(bytes_[sp.off + b])} << (8 * b);
  }
  if (c.type == ColumnType::kUInt) return u;
  const int shift = 64 - 8 * c.width;
  return static_cast<int64_t>(u << shift) >> shift;  // sign-extend
}

Row RowView::Decode(const TableDef& def) const {
  Row row(spans_.size());
  for (uint32_t i = 0; i < spans_.size(); ++i) {
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string_view>) {
            row[i] = std::string(v);
          } else {
            row[i] = v;
          }
        },
        column(def, i));
  }
  return row;
}

Result<Row> DecodeRow(const TableDef& def, std::string_view in) {
  RowView view;
  SUBITO_RETURN_IF_ERROR(view.Parse(def, in));
  return view.Decode(def);
}

std::optional<std::string> KeySuccessor(std::string p) {
  while (!p.empty() && static_cast<uint8_t>(p.back()) == 0xff) p.pop_back();
  if (p.empty()) return std::nullopt;
  p.back() = static_cast<char>(static_cast<uint8_t>(p.back()) + 1);
  return p;
}

}  // namespace subito::engine
