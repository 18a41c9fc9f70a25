#include "subito/placement.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace subito {
namespace {

uint64_t BytesWritten(const TableStats& t) {
  uint64_t n = 0;
  for (const IndexStats& ix : t.indexes) {
    n += ix.file_bytes_written + ix.double_write_bytes + ix.ppl_bytes + ix.redo_bytes;
  }
  return n;
}

uint64_t BytesRead(const TableStats& t) {
  uint64_t n = 0;
  for (const IndexStats& ix : t.indexes) n += ix.file_bytes_read;
  return n;
}

int64_t Growth(const TableStats& t) {
  int64_t bytes = 0;
  for (const IndexStats& ix : t.indexes) bytes += GrowthBytes(ix, t.page_size);
  return bytes;
}

TableClass Classify(const TableStats& t, int64_t growth) {
  const uint64_t changed = t.rows_inserted + t.rows_updated + t.rows_deleted;
  // Page lookups alone do not count: the engine's own work (reclaiming
  // per-page logs, statistics for the optimizer) looks pages up too.
  if (changed == 0) return t.rows_read == 0 ? TableClass::kIdle : TableClass::kReadOnly;
  if (t.rows_inserted > t.rows_deleted && (growth > 0 || t.rows_inserted >= t.rows_updated)) {
    return TableClass::kGrowing;
  }
  if (t.rows_read >= 10 * changed) return TableClass::kReadMostly;
  return TableClass::kHotUpdate;
}

std::string Percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", share * 100);
  return buf;
}

std::string Mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1 << 20));
  return buf;
}

void Recommend(PlacementAdvice& a) {
  switch (a.kind) {
    case TableClass::kIdle:
      a.action = "keep";
      a.reason = "not used since its counters started";
      return;
    case TableClass::kReadOnly:
      if (a.bytes_read == 0) {
        a.action = "keep";
        a.reason = "never changed; " + std::to_string(a.rows_read) +
                   " rows read, all from the buffer pool: no device serves it now";
        return;
      }
      a.action = "separate device";
      a.reason =
          "never changed; " + std::to_string(a.rows_read) + " rows read, " +
          Mib(static_cast<double>(a.bytes_read)) + " from its files (" + Percent(a.read_share) +
          " of page-file reads): on a device of its own (ALTER TABLE ... PAGE_DIRECTORY) its "
          "reads no longer queue behind other tables' writes (the TPC-C study: item moved, +7% "
          "tpmC)";
      return;
    case TableClass::kGrowing:
      a.action = "room to grow";
      a.reason = "grew " + Mib(static_cast<double>(a.growth_bytes)) + " (" +
                 Mib(a.growth_bytes_per_second * 3600) + " an hour); " + Percent(a.write_share) +
                 " of bytes written: place it where space is plentiful, and plan for its size";
      return;
    case TableClass::kReadMostly:
      a.action = a.read_share >= 0.25 ? "separate device" : "keep";
      a.reason = std::to_string(a.rows_read) + " rows read for " + std::to_string(a.rows_changed) +
                 " changed, " + Percent(a.read_share) + " of page-file reads" +
                 (a.read_share >= 0.25 ? ": a device of its own spreads the reads" : "");
      return;
    case TableClass::kHotUpdate:
      a.action = a.write_share >= 0.1 ? "fastest device" : "keep";
      a.reason = std::to_string(a.rows_changed) + " rows changed, " + Percent(a.write_share) +
                 " of bytes written (rank " + std::to_string(a.write_rank) + ")" +
                 (a.write_share >= 0.1
                      ? ": keep it on the fastest device; buffer pool space and per-page logs "
                        "(subito_ppl_size) take page writes off it"
                      : "");
      return;
  }
}

}  // namespace

int64_t GrowthBytes(const IndexStats& ix, uint32_t page_size) {
  return (static_cast<int64_t>(ix.pages) - static_cast<int64_t>(ix.pages_at_start)) *
         static_cast<int64_t>(page_size);
}

const char* TableClassName(TableClass c) {
  switch (c) {
    case TableClass::kIdle:
      return "idle";
    case TableClass::kReadOnly:
      return "read-only";
    case TableClass::kGrowing:
      return "growing";
    case TableClass::kReadMostly:
      return "read-mostly";
    case TableClass::kHotUpdate:
      return "hot-update";
  }
  return "?";
}

std::vector<PlacementAdvice> AdvisePlacement(const std::vector<TableStats>& tables) {
  std::vector<PlacementAdvice> out(tables.size());
  uint64_t all_read = 0, all_written = 0;
  for (size_t i = 0; i < tables.size(); ++i) {
    const TableStats& t = tables[i];
    PlacementAdvice& a = out[i];
    a.table = t.name;
    a.rows_read = t.rows_read;
    a.rows_changed = t.rows_inserted + t.rows_updated + t.rows_deleted;
    a.bytes_read = BytesRead(t);
    a.bytes_written = BytesWritten(t);
    a.growth_bytes = Growth(t);
    a.seconds = t.seconds;
    a.growth_bytes_per_second = t.seconds > 0 ? static_cast<double>(a.growth_bytes) / t.seconds : 0;
    a.kind = Classify(t, a.growth_bytes);
    all_read += a.bytes_read;
    all_written += a.bytes_written;
  }
  std::vector<size_t> by_writes(out.size());
  for (size_t i = 0; i < out.size(); ++i) by_writes[i] = i;
  std::stable_sort(by_writes.begin(), by_writes.end(),
                   [&](size_t x, size_t y) { return out[x].bytes_written > out[y].bytes_written; });
  for (size_t r = 0; r < by_writes.size(); ++r) out[by_writes[r]].write_rank = r + 1;
  for (PlacementAdvice& a : out) {
    if (all_read > 0) a.read_share = static_cast<double>(a.bytes_read) / all_read;
    if (all_written > 0) a.write_share = static_cast<double>(a.bytes_written) / all_written;
    Recommend(a);
  }
  return out;
}

}  // namespace subito
