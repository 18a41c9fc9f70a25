// Row and key encoding helpers (engine/row_codec.h) against their
// definitions: random canonical rows of a table with every kind of column.
#include "engine/row_codec.h"

#include <gtest/gtest.h>

#include <random>

#include "test_util.h"

namespace subito::engine {
namespace {

// id INT (pk), u UINT 2 bytes, s STRING nullable, d INT DESC nullable;
// index a (u, s), unique b (d, s).
TableDef Def() {
  TableDef def;
  def.name = "t";
  def.columns = {{"id", ColumnType::kInt, 8, false},
                 {"u", ColumnType::kUInt, 2, false},
                 {"s", ColumnType::kString, 8, true},
                 {"d", ColumnType::kInt, 4, true}};
  def.columns[3].descending = true;
  def.primary_key = {0};
  def.indexes = {{"a", {1, 2}, false}, {"b", {3, 2}, true}};
  return def;
}

// Few distinct values per column, so that rows often share keys; strings
// with NUL bytes (the escape) and ones that are prefixes of others.
Row RandomRow(std::mt19937_64& rng) {
  const char* strings[] = {"", "a", "a\0", "a\0b", "\0", "ab", "b"};
  const size_t lengths[] = {0, 1, 2, 3, 1, 2, 1};
  Row r(4);
  r[0] = Value(static_cast<int64_t>(rng() % 3) - 1);
  r[1] = Value(static_cast<uint64_t>(rng() % 3));
  const size_t s = rng() % 8;
  r[2] = s == 7 ? Value() : Value(std::string(strings[s], lengths[s]));
  const int d = static_cast<int>(rng() % 4);
  r[3] = d == 3 ? Value() : Value(static_cast<int64_t>(d) - 1);
  return r;
}

TEST(RowCodec, SameRowKeyIsEqualityOfTheEncodedKeys) {
  const TableDef def = Def();
  std::mt19937_64 rng(test::TestSeed());
  int same = 0;
  for (int i = 0; i < 5000; ++i) {
    const Row a = RandomRow(rng), b = RandomRow(rng);
    for (uint32_t index = 0; index <= def.indexes.size(); ++index) {
      const bool equal_keys = RowKey(def, index, a) == RowKey(def, index, b);
      ASSERT_EQ(SameRowKey(def, index, a, b), equal_keys) << "index " << index << ", pair " << i;
      same += equal_keys ? 1 : 0;
    }
  }
  EXPECT_GT(same, 100);  // the rows did share keys
}

TEST(RowCodec, OwnColumnsKeyIsTheEncodedIndexColumnsAndPrefixesTheRowKey) {
  const TableDef def = Def();
  std::mt19937_64 rng(test::TestSeed());
  for (int i = 0; i < 2000; ++i) {
    const Row row = RandomRow(rng);
    for (uint32_t index = 1; index <= def.indexes.size(); ++index) {
      const std::vector<uint32_t>& columns = def.indexes[index - 1].columns;
      Row values;
      for (uint32_t c : columns) values.push_back(row[c]);
      Result<std::string> encoded = EncodeKey(def, columns, values);
      ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
      const std::string own = OwnColumnsKey(def, index, row);
      ASSERT_EQ(own, *encoded) << "index " << index << ", row " << i;
      ASSERT_EQ(RowKey(def, index, row).substr(0, own.size()), own);
    }
  }
}

}  // namespace
}  // namespace subito::engine
