// Placement advice from per-table I/O counters (the TPC-C I/O study, seed
// 004): each table is classed by what it did since its counters started
// (Table::Stats), and the class says where its files belong.
//
//   idle        no row read or changed (page lookups alone do not count)
//   read-only   rows read, none changed
//   growing     more rows inserted than deleted, and its files grew or
//               inserts outnumber updates (history, orders, order_line)
//   read-mostly at least 10 rows read per row changed
//   hot-update  the rest: changes of existing rows dominate (stock)
//
// The figures behind a class are each table's share of all tables' page-file
// reads and of all bytes written on its behalf (page files, double-write,
// per-page logs, redo), and its files' growth.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "subito/database.h"

namespace subito {

enum class TableClass { kIdle, kReadOnly, kGrowing, kReadMostly, kHotUpdate };

const char* TableClassName(TableClass c);

struct PlacementAdvice {
  std::string table;
  TableClass kind = TableClass::kIdle;
  // What to do with the table's files: "separate device", "fastest device",
  // "room to grow" or "keep".
  std::string action;
  std::string reason;  // the recommendation in words, with its figures
  uint64_t rows_read = 0, rows_changed = 0;
  uint64_t bytes_read = 0, bytes_written = 0;  // page-file reads; every write
  double read_share = 0, write_share = 0;      // of all tables' (0..1)
  int64_t growth_bytes = 0;                    // of its page files since the start
  double growth_bytes_per_second = 0;
  uint32_t write_rank = 0;  // 1: the most bytes written
  double seconds = 0;       // the counters' window
};

// One entry per table, in the order given.
std::vector<PlacementAdvice> AdvisePlacement(const std::vector<TableStats>& tables);

// How much an index's file grew since its counters started (negative if it
// shrank), in bytes of the database's pages.
int64_t GrowthBytes(const IndexStats& ix, uint32_t page_size);

}  // namespace subito
