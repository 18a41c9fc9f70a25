// Encoded keys sort (memcmp) exactly as their values do, round-trip, and
// damaged keys are refused.
#include "btree/key_encoding.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <tuple>

#include "test_util.h"

namespace subito::btree {
namespace {
using namespace std::string_literals;

int Sign(int c) {
  return (c > 0) - (c < 0);
}
int Cmp(const std::string& a, const std::string& b) {
  return Sign(a.compare(b));
}

TEST(KeyEncoding, SignedAndUnsignedIntegersOfEveryWidthSortAsNumbers) {
  std::mt19937_64 rng(test::TestSeed());
  for (int width = 1; width <= 8; ++width) {
    const int64_t lo = width == 8 ? INT64_MIN : -(int64_t{1} << (8 * width - 1));
    const int64_t hi = width == 8 ? INT64_MAX : (int64_t{1} << (8 * width - 1)) - 1;
    const uint64_t umax = width == 8 ? UINT64_MAX : (uint64_t{1} << (8 * width)) - 1;
    std::vector<int64_t> s = {lo, hi, 0, -1, 1, lo + 1, hi - 1};
    std::vector<uint64_t> u = {0, umax, 1, umax - 1, umax / 2, umax / 2 + 1};
    for (int i = 0; i < 200; ++i) {
      const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);  // no overflow
      s.push_back(static_cast<int64_t>(static_cast<uint64_t>(lo) +
                                       (width == 8 ? rng() : rng() % (span + 1))));
      u.push_back(width == 8 ? rng() : rng() % (umax + 1));
    }
    for (size_t i = 0; i < s.size(); ++i) {
      for (size_t j = 0; j < s.size(); j += 7) {
        std::string a = KeyEncoder().Signed(s[i], width).Release();
        std::string b = KeyEncoder().Signed(s[j], width).Release();
        ASSERT_EQ(Cmp(a, b), (s[i] > s[j]) - (s[i] < s[j])) << s[i] << " vs " << s[j];
        KeyDecoder d(a);
        ASSERT_EQ(*d.Signed(width), s[i]);
        EXPECT_TRUE(d.done());
      }
    }
    for (size_t i = 0; i < u.size(); ++i) {
      for (size_t j = 0; j < u.size(); j += 5) {
        std::string a = KeyEncoder().Unsigned(u[i], width).Release();
        std::string b = KeyEncoder().Unsigned(u[j], width).Release();
        ASSERT_EQ(Cmp(a, b), (u[i] > u[j]) - (u[i] < u[j]));
        ASSERT_EQ(*KeyDecoder(a).Unsigned(width), u[i]);
      }
    }
  }
}

TEST(KeyEncoding, BinaryStringsSortBytewiseAndArePrefixFree) {
  std::vector<std::string> v = {"",
                                std::string(1, '\0'),
                                std::string(2, '\0'),
                                "a",
                                "a\0"s,
                                "a\0b"s,
                                "ab",
                                "abc",
                                "\xff",
                                "\xff\xff",
                                "b",
                                "a\x01"};
  std::mt19937_64 rng(test::TestSeed());
  for (int i = 0; i < 100; ++i) {
    std::string s(rng() % 6, '\0');
    for (char& c : s)
      c = static_cast<char>(
          "\x00\x01\xff"
          "ab"[rng() % 5]);
    v.push_back(s);
  }
  for (const auto& a : v) {
    for (const auto& b : v) {
      // Followed by another part: the boundary must not change the order.
      std::string ea = KeyEncoder().Bytes(a).Unsigned(7, 4).Release();
      std::string eb = KeyEncoder().Bytes(b).Unsigned(3, 4).Release();
      int want = Sign(a.compare(b));
      if (want == 0) want = 1;  // equal strings: the next part (7 > 3) decides
      ASSERT_EQ(Cmp(ea, eb), want)
          << testing::PrintToString(a) << " vs " << testing::PrintToString(b);
    }
    const std::string key = KeyEncoder().Bytes(a).Release();
    KeyDecoder d(key);
    ASSERT_EQ(*d.Bytes(), a);
    EXPECT_TRUE(d.done());
  }
}

// (nullable int, string, signed int): NULL sorts first, as in MariaDB.
using Row = std::tuple<std::optional<int32_t>, std::string, int16_t>;

std::string Encode(const Row& r) {
  KeyEncoder e;
  if (std::get<0>(r)) {
    e.NotNull().Signed(*std::get<0>(r), 4);
  } else {
    e.Null();
  }
  return e.Bytes(std::get<1>(r)).Signed(std::get<2>(r), 2).Release();
}

TEST(KeyEncoding, CompositeKeysWithNullsSortAsTuples) {
  std::mt19937_64 rng(test::TestSeed());
  std::vector<Row> rows;
  for (int i = 0; i < 300; ++i) {
    std::optional<int32_t> a;
    if (rng() % 4) a = static_cast<int32_t>(rng() % 7) - 3;
    std::string s(rng() % 3, 'x');
    for (char& c : s) c = static_cast<char>("\0ab"[rng() % 3]);
    rows.emplace_back(a, s, static_cast<int16_t>(static_cast<int>(rng() % 5) - 2));
  }
  std::vector<Row> by_value = rows, by_key = rows;
  std::sort(by_value.begin(), by_value.end());  // std::optional: nullopt < any value
  std::sort(by_key.begin(), by_key.end(),
            [](const Row& x, const Row& y) { return Encode(x) < Encode(y); });
  EXPECT_EQ(by_value, by_key);
  for (const Row& r : rows) {
    const std::string key = Encode(r);
    KeyDecoder d(key);
    auto null = d.IsNull();
    ASSERT_TRUE(null.ok());
    EXPECT_EQ(*null, !std::get<0>(r).has_value());
    if (!*null) {
      EXPECT_EQ(*d.Signed(4), *std::get<0>(r));
    }
    EXPECT_EQ(*d.Bytes(), std::get<1>(r));
    EXPECT_EQ(*d.Signed(2), std::get<2>(r));
    EXPECT_TRUE(d.done());
  }
}

// The same tuples with the first two parts descending: (a DESC, s DESC, i)
// sorts by a high to low with NULLs last, then s high to low, then i.
std::string EncodeDescending(const Row& r) {
  KeyEncoder e;
  size_t from = e.size();
  if (std::get<0>(r)) {
    e.NotNull().Signed(*std::get<0>(r), 4);
  } else {
    e.Null();
  }
  e.Invert(from);
  from = e.size();
  e.Bytes(std::get<1>(r)).Invert(from);
  return e.Signed(std::get<2>(r), 2).Release();
}

TEST(KeyEncoding, DescendingPartsSortInReverseWithNullsLastAndRoundTrip) {
  std::mt19937_64 rng(test::TestSeed());
  std::vector<Row> rows;
  for (int i = 0; i < 300; ++i) {
    std::optional<int32_t> a;
    if (rng() % 4) a = static_cast<int32_t>(rng() % 7) - 3;
    std::string s(rng() % 3, 'x');
    for (char& c : s) c = static_cast<char>("\0ab\xff"[rng() % 4]);
    rows.emplace_back(a, s, static_cast<int16_t>(static_cast<int>(rng() % 5) - 2));
  }
  auto by_value = [](const Row& x, const Row& y) {
    const auto& [xa, xs, xi] = x;
    const auto& [ya, ys, yi] = y;
    if (xa != ya) return ya < xa;  // descending: NULL (nullopt) last
    if (xs != ys) return ys < xs;
    return xi < yi;
  };
  std::vector<Row> expected = rows, by_key = rows;
  std::sort(expected.begin(), expected.end(), by_value);
  std::sort(by_key.begin(), by_key.end(),
            [](const Row& x, const Row& y) { return EncodeDescending(x) < EncodeDescending(y); });
  EXPECT_EQ(expected, by_key);
  for (const Row& r : rows) {
    const std::string key = EncodeDescending(r);
    KeyDecoder d(key);
    d.SetDescending(true);
    auto null = d.IsNull();
    ASSERT_TRUE(null.ok());
    EXPECT_EQ(*null, !std::get<0>(r).has_value());
    if (!*null) {
      EXPECT_EQ(*d.Signed(4), *std::get<0>(r));
    }
    EXPECT_EQ(*d.Bytes(), std::get<1>(r));
    d.SetDescending(false);
    EXPECT_EQ(*d.Signed(2), std::get<2>(r));
    EXPECT_TRUE(d.done());
  }
}

TEST(KeyEncoding, DamagedKeysAreRefused) {
  std::string k = KeyEncoder().NotNull().Unsigned(5, 4).Bytes("hello").Release();
  for (size_t cut = 0; cut < k.size(); ++cut) {
    KeyDecoder d(std::string_view(k).substr(0, cut));
    auto n = d.IsNull();
    if (!n.ok()) continue;
    auto u = d.Unsigned(4);
    if (!u.ok()) {
      EXPECT_TRUE(u.status().IsCorruption());
      continue;
    }
    auto b = d.Bytes();
    ASSERT_FALSE(b.ok()) << "truncated key accepted at " << cut;
    EXPECT_TRUE(b.status().IsCorruption());
  }
  const std::string bad_marker = "\x07", bad_escape = "ab\x00\x05"s;
  EXPECT_FALSE(KeyDecoder(bad_marker).IsNull().ok());
  EXPECT_FALSE(KeyDecoder(bad_escape).Bytes().ok());
  EXPECT_TRUE(KeyDecoder(bad_marker).Unsigned(9).status().IsInvalidArgument());
}

}  // namespace
}  // namespace subito::btree
