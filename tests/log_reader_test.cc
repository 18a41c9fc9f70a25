// Format-level tests: geometry, codecs, and the reader on hand-built logs.
#include "log/log_reader.h"

#include <gtest/gtest.h>

#include "log/geometry.h"

namespace subito::log {
namespace {

TEST(Geometry, StripesRotateOverStreams) {
  Geometry g{4, 4096, 16 * 4096};
  EXPECT_EQ(g.capacity(), 4u * 16 * 4096);
  EXPECT_EQ(g.StreamOf(0), 0u);
  EXPECT_EQ(g.StreamOf(4096), 1u);
  EXPECT_EQ(g.StreamOf(4 * 4096 + 5), 0u);
  EXPECT_EQ(g.FileOffsetOf(4 * 4096 + 5), kDataOffset + 4096 + 5);
  // A full lap later the same place is used again.
  EXPECT_EQ(g.FileOffsetOf(7), g.FileOffsetOf(7 + g.capacity()));
  EXPECT_EQ(g.NextOwnedBy(2, 100), 2u * 4096);
  EXPECT_EQ(g.NextOwnedBy(0, 100), 100u);
  EXPECT_EQ(g.NextOwnedBy(0, 4096 + 3), 4u * 4096);
  EXPECT_EQ(g.ContiguousAt(4096 + 96), 4000u);
}

TEST(Geometry, OneStreamIsTheIdentityRing) {
  Geometry g{1, 4096, 8 * 4096};
  for (Lsn x : {Lsn{0}, Lsn{4095}, Lsn{4096}, Lsn{8 * 4096 + 17}}) {
    EXPECT_EQ(g.FileOffsetOf(x), kDataOffset + x % (8 * 4096));
    EXPECT_EQ(g.NextOwnedBy(0, x), x);
  }
}

TEST(Format, RecordSpanIsAlignedAndCoversTheHeader) {
  EXPECT_EQ(RecordSpan(0), 32u);
  EXPECT_EQ(RecordSpan(1), 40u);
  EXPECT_EQ(RecordSpan(8), 40u);
  EXPECT_EQ(RecordSpan(9), 48u);
}

TEST(Format, RecordCrcCoversSaltHeaderAndPayload) {
  uint8_t h[kRecordHeaderSize] = {};
  uint8_t p[3] = {1, 2, 3};
  uint32_t base = RecordCrc(1, h, p, 3);
  EXPECT_NE(base, RecordCrc(2, h, p, 3));
  h[20] = 1;
  EXPECT_NE(base, RecordCrc(1, h, p, 3));
  h[20] = 0;
  p[2] = 4;
  EXPECT_NE(base, RecordCrc(1, h, p, 3));
  h[0] = 0xff;  // the crc field itself is not covered
  p[2] = 3;
  EXPECT_EQ(base, RecordCrc(1, h, p, 3));
}

TEST(Reader, RefusesWhatIsNotALog) {
  std::vector<uint8_t> small(100, 0);
  auto r = ScanLog({{"tiny", small.data(), small.size()}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tiny: truncated"), std::string::npos);
  std::vector<uint8_t> junk(8192, 0x5a);
  r = ScanLog({{"junk", junk.data(), junk.size()}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a Subito log file"), std::string::npos);
  EXPECT_FALSE(ScanLog({}).ok());
}

}  // namespace
}  // namespace subito::log
