#include "buffer/page_writer.h"

#include <algorithm>
#include <set>

#include "util/strings.h"

namespace subito::buffer {

Status PageWriter::Write(const std::vector<PageImage>& batch,
                         const std::function<page::SpaceFile*(uint32_t)>& space_of) {
  if (batch.empty()) return Status::OK();
  if (batch.size() > max_batch()) {
    return Status::InvalidArgument(
        StrFormat("page write batch of %zu pages exceeds %u", batch.size(), max_batch()));
  }
  std::lock_guard lock(mu_);
  if (!failed_.ok()) return failed_;
  uint64_t max_lsn = 0;
  for (const PageImage& p : batch) max_lsn = std::max(max_lsn, p.page_lsn);
  // 1. WAL (P2).
  SUBITO_RETURN_IF_ERROR(log_->WaitDurable(std::min(max_lsn, log_->reserved_lsn())));
  if (max_lsn > log_->durable_lsn()) {
    return Status::Corruption(StrFormat("page LSN %llu is past the log's end %llu",
                                        static_cast<unsigned long long>(max_lsn),
                                        static_cast<unsigned long long>(log_->durable_lsn())));
  }
  // 2. Double-write (D2).
  if (dwb_) {
    SUBITO_RETURN_IF_ERROR(dwb_->WriteBatch(batch));
    for (const PageImage& p : batch) {
      if (page::SpaceFile* space = space_of(p.space_id)) space->CountPmBytes(dwb_->page_size());
    }
  }
  // 3. In place, then 4. sync.
  std::set<page::SpaceFile*> touched;
  Status st;
  for (const PageImage& p : batch) {
    page::SpaceFile* space = space_of(p.space_id);
    if (space == nullptr) continue;  // dropped meanwhile
    st = space->WritePage(p.page_no, p.data);
    if (!st.ok()) break;
    touched.insert(space);
  }
  for (page::SpaceFile* s : touched) {
    if (!st.ok()) break;
    st = s->Sync();
  }
  if (!st.ok()) {
    failed_ = st;
    return st;
  }
  pages_.fetch_add(batch.size(), std::memory_order_relaxed);
  batches_.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

}  // namespace subito::buffer
