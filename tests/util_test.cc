#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "subito/status.h"
#include "util/coding.h"
#include "util/crc32c.h"
#include "util/striped_counter.h"

namespace subito {
namespace {

TEST(Crc32c, StandardCheckValue) {
  // The CRC-32C check value from the Castagnoli catalogue.
  EXPECT_EQ(crc32c::Value("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c::Value("", 0), 0u);
  uint8_t zeros[32] = {};
  EXPECT_EQ(crc32c::Value(zeros, sizeof zeros), 0x8A9136AAu);  // RFC 3720 B.4
}

TEST(Crc32c, ExtendEqualsWhole) {
  const char* s = "hello, persistent world";
  size_t n = std::strlen(s);
  for (size_t cut = 0; cut <= n; ++cut) {
    EXPECT_EQ(crc32c::Extend(crc32c::Value(s, cut), s + cut, n - cut), crc32c::Value(s, n));
  }
}

// Short inputs take the SSE4.2 instruction, long ones ISA-L: a long
// input's CRC built from short pieces (one byte, then 7-byte steps) equals
// its CRC in one call, at every length around the switch.
TEST(Crc32c, ShortAndLongPathsAgree) {
  std::vector<uint8_t> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t n = 0; n <= bytes.size(); n += n < 300 ? 1 : 61) {
    uint32_t bytewise = 0, steps = 0;
    for (size_t i = 0; i < n; ++i) bytewise = crc32c::Extend(bytewise, &bytes[i], 1);
    for (size_t i = 0; i < n; i += 7)
      steps = crc32c::Extend(steps, &bytes[i], std::min<size_t>(7, n - i));
    const uint32_t whole = crc32c::Value(bytes.data(), n);
    ASSERT_EQ(bytewise, whole) << n << " bytes";
    ASSERT_EQ(steps, whole) << n << " bytes";
  }
}

TEST(Coding, RoundTripsLittleEndian) {
  uint8_t b[8];
  EncodeFixed64(b, 0x0102030405060708ull);
  EXPECT_EQ(b[0], 0x08);
  EXPECT_EQ(DecodeFixed64(b), 0x0102030405060708ull);
  EncodeFixed32(b, 0xA1B2C3D4u);
  EXPECT_EQ(b[0], 0xD4);
  EXPECT_EQ(DecodeFixed32(b), 0xA1B2C3D4u);
  EXPECT_EQ(AlignUp(513, 512), 1024u);
  EXPECT_EQ(AlignDown(1023, 512), 512u);
  EXPECT_TRUE(IsPowerOfTwo(4096));
  EXPECT_FALSE(IsPowerOfTwo(0));
  EXPECT_FALSE(IsPowerOfTwo(96));
}

TEST(Status, NamesCodeAndMessage) {
  Status s = Status::Corruption("log.0 offset 12: bad");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_EQ(s.ToString(), "Corruption: log.0 offset 12: bad");
  EXPECT_EQ(Status::OK().ToString(), "OK");
  Result<int> r = Status::NotFound("x");
  EXPECT_FALSE(r.ok());
  Result<int> v = 7;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 7);
}

TEST(StripedCounter, SumsEveryThreadsAddsAndResets) {
  StripedCounter c;
  EXPECT_EQ(c.value(), 0u);
  // More threads than stripes, so that some share a slot.
  constexpr int kThreads = static_cast<int>(StripedCounter::kStripes) + 3;
  constexpr uint64_t kAdds = 20000;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&c, t] {
      for (uint64_t i = 0; i < kAdds; ++i) c.Add(static_cast<uint64_t>(t) + 1);
    });
  }
  for (std::thread& t : ts) t.join();
  uint64_t want = 0;
  for (int t = 0; t < kThreads; ++t) want += kAdds * (static_cast<uint64_t>(t) + 1);
  EXPECT_EQ(c.value(), want);
  c.Reset();
  EXPECT_EQ(c.value(), 0u);
  c.Add();
  EXPECT_EQ(c.value(), 1u);
}

}  // namespace
}  // namespace subito
