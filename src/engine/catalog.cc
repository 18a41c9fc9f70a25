#include "engine/catalog.h"

#include <cstring>
#include <filesystem>
#include <set>

#include "engine/row_codec.h"
#include "util/coding.h"
#include "util/crc32c.h"
#include "util/strings.h"

namespace subito::engine {
namespace {

constexpr char kMagic[8] = {'S', 'U', 'B', 'I', 'T', 'O', 'C', 'A'};
constexpr size_t kHeaderSize = 20;
constexpr uint64_t kMaxCatalogBytes = 64u << 20;  // reader and writer alike

class Writer {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) {
    char b[4];
    EncodeFixed32(b, v);
    out_.append(b, 4);
  }
  void U64(uint64_t v) {
    char b[8];
    EncodeFixed64(b, v);
    out_.append(b, 8);
  }
  void Str(const std::string& s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool U8(uint8_t& v) {
    if (in_.size() - pos_ < 1) return false;
    v = static_cast<uint8_t>(in_[pos_++]);
    return true;
  }
  bool U32(uint32_t& v) {
    if (in_.size() - pos_ < 4) return false;
    v = DecodeFixed32(in_.data() + pos_);
    pos_ += 4;
    return true;
  }
  bool U64(uint64_t& v) {
    if (in_.size() - pos_ < 8) return false;
    v = DecodeFixed64(in_.data() + pos_);
    pos_ += 8;
    return true;
  }
  bool Str(std::string& s) {
    uint32_t n = 0;
    if (!U32(n) || in_.size() - pos_ < n) return false;
    s.assign(in_.substr(pos_, n));
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

std::string EncodeBody(const Catalog& c) {
  Writer w;
  w.U32(c.page_size);
  w.U32(c.next_space_id);
  w.U32(c.next_table_id);
  w.U8(c.in_use ? 1 : 0);
  w.U64(c.log_salt);
  w.U64(c.lsn_floor);
  w.U32(static_cast<uint32_t>(c.tables.size()));
  for (const CatalogTable& t : c.tables) {
    w.U32(t.id);
    w.U8(static_cast<uint8_t>(t.state));
    w.Str(t.def.name);
    w.Str(t.def.data_dir);
    w.U32(static_cast<uint32_t>(t.def.auto_increment_column));
    w.U64(t.def.auto_increment_start);
    w.U8(t.def.temporary ? 1 : 0);
    w.U32(static_cast<uint32_t>(t.def.columns.size()));
    for (const Column& col : t.def.columns) {
      w.Str(col.name);
      w.U8(static_cast<uint8_t>(col.type));
      w.U8(col.width);
      w.U8(col.nullable ? 1 : 0);
      w.U32(col.max_length);
      w.U8(col.descending ? 1 : 0);
    }
    w.U32(static_cast<uint32_t>(t.indexes.size()));
    for (const CatalogIndex& i : t.indexes) {
      w.Str(i.def.name);
      w.U8(i.def.unique ? 1 : 0);
      w.U8(static_cast<uint8_t>(i.state));
      w.U32(i.space_id);
      w.U32(static_cast<uint32_t>(i.def.columns.size()));
      for (uint32_t col : i.def.columns) w.U32(col);
    }
  }
  return std::move(w.out());
}

bool DecodeBody(std::string_view body, uint32_t version, Catalog& c) {
  Reader r(body);
  uint32_t tables = 0;
  uint8_t in_use = 0;
  if (!r.U32(c.page_size) || !r.U32(c.next_space_id) || !r.U32(c.next_table_id) || !r.U8(in_use) ||
      in_use > 1 || (version >= 2 && !r.U64(c.log_salt)) || (version >= 4 && !r.U64(c.lsn_floor)) ||
      !r.U32(tables)) {
    return false;
  }
  c.in_use = in_use != 0;
  for (uint32_t ti = 0; ti < tables; ++ti) {
    CatalogTable t;
    uint8_t state = 0;
    uint8_t temporary = 0;
    uint32_t autoinc = 0, columns = 0, indexes = 0;
    if (!r.U32(t.id) || !r.U8(state) || state > 3 || !r.Str(t.def.name) || !r.Str(t.def.data_dir) ||
        !r.U32(autoinc) || (version >= 2 && !r.U64(t.def.auto_increment_start)) ||
        (version >= 3 && (!r.U8(temporary) || temporary > 1)) || !r.U32(columns) ||
        columns > 4096) {
      return false;
    }
    t.def.temporary = temporary != 0;
    t.state = static_cast<DefState>(state);
    t.def.auto_increment_column = static_cast<int32_t>(autoinc);
    for (uint32_t ci = 0; ci < columns; ++ci) {
      Column col;
      uint8_t type = 0, nullable = 0, descending = 0;
      if (!r.Str(col.name) || !r.U8(type) || !r.U8(col.width) || !r.U8(nullable) ||
          !r.U32(col.max_length) || type < 1 || type > 3 || nullable > 1 ||
          (version >= 3 && (!r.U8(descending) || descending > 1))) {
        return false;
      }
      col.type = static_cast<ColumnType>(type);
      col.nullable = nullable != 0;
      col.descending = descending != 0;
      t.def.columns.push_back(std::move(col));
    }
    if (!r.U32(indexes) || indexes < 1 || indexes > 1024) return false;
    for (uint32_t ii = 0; ii < indexes; ++ii) {
      CatalogIndex i;
      uint8_t unique = 0, istate = 0;
      uint32_t n = 0;
      if (!r.Str(i.def.name) || !r.U8(unique) || !r.U8(istate) || istate > 2 ||
          !r.U32(i.space_id) || !r.U32(n) || n > 4096) {
        return false;
      }
      i.def.unique = unique != 0;
      i.state = static_cast<DefState>(istate);
      for (uint32_t k = 0; k < n; ++k) {
        uint32_t col = 0;
        if (!r.U32(col)) return false;
        i.def.columns.push_back(col);
      }
      t.indexes.push_back(std::move(i));
    }
    t.def.primary_key = t.indexes[0].def.columns;
    c.tables.push_back(std::move(t));
  }
  return r.done();
}

// What the bytes must mean, beyond parsing (they passed the checksum, so a
// failure here is a bug or a hand-edited file): every definition valid as
// CreateTable would require, ids below the next ones and never repeated,
// live names distinct, table directories absolute and normal.
std::string ValidateCatalog(const Catalog& c) {
  if (c.page_size != 4096 && c.page_size != 8192 && c.page_size != 16384) {
    return StrFormat("impossible page size %u", c.page_size);
  }
  std::set<uint32_t> table_ids, space_ids;
  std::set<std::string> live_names;
  for (const CatalogTable& t : c.tables) {
    const std::string what = "table " + std::to_string(t.id) + " ('" + t.def.name + "')";
    if (t.id >= c.next_table_id || !table_ids.insert(t.id).second) {
      return what + ": id repeated or not below the next id";
    }
    for (const CatalogIndex& i : t.indexes) {
      if (i.space_id >= c.next_space_id || !space_ids.insert(i.space_id).second) {
        return what + ": space id " + std::to_string(i.space_id) +
               " repeated or not below the next id";
      }
    }
    if (!t.def.data_dir.empty()) {
      const std::filesystem::path d(t.def.data_dir);
      if (!d.is_absolute() || d.lexically_normal() != d) {
        return what + ": data directory " + t.def.data_dir + " is not an absolute normal path";
      }
    }
    if (t.state == DefState::kLive && !live_names.insert(t.def.name).second) {
      return what + ": a second live table of that name";
    }
    TableDef def = t.def;
    def.indexes.clear();
    for (size_t k = 1; k < t.indexes.size(); ++k) def.indexes.push_back(t.indexes[k].def);
    if (Status st = ValidateTableDef(def); !st.ok()) return what + ": " + st.message();
  }
  return "";
}

std::string Sanitize(const std::string& s) {
  std::string out;
  for (char ch : s) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '_';
    out.push_back(ok ? ch : '_');
  }
  return out;
}

}  // namespace

std::string CatalogPath(const std::string& dir) {
  return dir + "/catalog";
}

std::string SpacePath(const std::string& dir, uint32_t table_id, const std::string& index,
                      uint32_t space_id) {
  return StrFormat("%s/t%u-%s-%u.sbt", dir.c_str(), table_id, Sanitize(index).c_str(), space_id);
}

Status WriteCatalog(FileSystem* fs, const std::string& dir, const Catalog& catalog) {
  const std::string body = EncodeBody(catalog);
  if (body.size() > kMaxCatalogBytes - kHeaderSize) {
    return Status::TooLarge(
        StrFormat("the catalog would be %zu bytes, over the %llu its reader "
                  "accepts: too many tables, columns or indexes",
                  body.size() + kHeaderSize, static_cast<unsigned long long>(kMaxCatalogBytes)));
  }
  std::string image(kHeaderSize, '\0');
  std::memcpy(image.data(), kMagic, 8);
  EncodeFixed32(image.data() + 8, kCatalogVersion);
  EncodeFixed32(image.data() + 12, static_cast<uint32_t>(body.size()));
  EncodeFixed32(image.data() + 16, crc32c::Value(body.data(), body.size()));
  image += body;
  return ReplaceFile(fs, CatalogPath(dir), image.data(), image.size());
}

Result<std::optional<Catalog>> ReadCatalog(FileSystem* fs, const std::string& dir) {
  const std::string path = CatalogPath(dir);
  if (!fs->Exists(path)) return std::optional<Catalog>();
  Result<std::unique_ptr<File>> f = fs->Open(path);
  if (!f.ok()) return f.status();
  const uint64_t size = (*f)->Size();
  auto bad = [&](const char* what) {
    return Status::Corruption(StrFormat("catalog %s: %s", path.c_str(), what));
  };
  if (size < kHeaderSize || size > kMaxCatalogBytes) return bad("wrong size");
  std::string image(size, '\0');
  SUBITO_RETURN_IF_ERROR((*f)->Read(0, image.data(), size));
  if (std::memcmp(image.data(), kMagic, 8) != 0) return bad("not a Subito catalog (bad magic)");
  const uint32_t version = DecodeFixed32(image.data() + 8);
  if (version < 1 || version > kCatalogVersion) {
    return bad(StrFormat("unsupported catalog format version %u (this build reads 1 to %u)",
                         version, kCatalogVersion)
                   .c_str());
  }
  if (DecodeFixed32(image.data() + 12) != size - kHeaderSize) return bad("truncated");
  std::string_view body(image.data() + kHeaderSize, size - kHeaderSize);
  if (DecodeFixed32(image.data() + 16) != crc32c::Value(body.data(), body.size())) {
    return bad("checksum mismatch");
  }
  Catalog c;
  if (!DecodeBody(body, version, c)) return bad("body does not parse");
  if (const std::string why = ValidateCatalog(c); !why.empty()) {
    return bad(("invalid contents: " + why).c_str());
  }
  return std::optional<Catalog>(std::move(c));
}

}  // namespace subito::engine
