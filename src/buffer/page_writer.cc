#include "buffer/page_writer.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

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
  if (dwb_ && !retry_images_) {
    Result<AlignedBuffer> b = AlignedBuffer::Allocate(size_t{dwb_->slots()} * dwb_->page_size());
    if (!b.ok()) return b.status();
    retry_images_ = std::move(*b);
  }
  if (!pending_.empty()) {  // P4: the failed batch first, the slots hold it
    if (Status st = WriteInPlace(pending_, space_of); !st.ok()) {
      failures_.fetch_add(1, std::memory_order_relaxed);
      return st;
    }
    pending_.clear();
  }
  uint64_t max_lsn = 0;
  for (const PageImage& p : batch) max_lsn = std::max(max_lsn, p.page_lsn);
  // 1. WAL (P2).
  SUBITO_RETURN_IF_ERROR(log_->WaitDurable(std::min(max_lsn, log_->reserved_lsn())));
  if (max_lsn > log_->durable_lsn()) {
    return Status::Corruption(StrFormat("page LSN %llu is past the log's end %llu",
                                        static_cast<unsigned long long>(max_lsn),
                                        static_cast<unsigned long long>(log_->durable_lsn())));
  }
  // 2. Double-write (D2). A failure here wrote nothing in place.
  if (dwb_) {
    if (Status st = dwb_->WriteBatch(batch); !st.ok()) {
      failures_.fetch_add(1, std::memory_order_relaxed);
      return st;
    }
    for (const PageImage& p : batch) {
      if (page::SpaceFile* space = space_of(p.space_id)) space->CountDoubleWrite(dwb_->page_size());
    }
  }
  // 3. In place, then 4. sync.
  if (Status st = WriteInPlace(batch, space_of); !st.ok()) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    if (dwb_) {
      const uint32_t ps = dwb_->page_size();
      uint8_t* copy = retry_images_->get();
      for (const PageImage& p : batch) {
        std::memcpy(copy, p.data, ps);
        pending_.push_back({p.space_id, p.page_no, copy});
        copy += ps;
      }
    }
    return st;
  }
  pages_.fetch_add(batch.size(), std::memory_order_relaxed);
  batches_.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

void PageWriter::ForgetSpace(uint32_t space_id) {
  std::lock_guard lock(mu_);
  std::erase_if(pending_, [&](const Owned& p) { return p.space_id == space_id; });
}

template <typename Images>
Status PageWriter::WriteInPlace(const Images& images,
                                const std::function<page::SpaceFile*(uint32_t)>& space_of) {
  // In page order, each run of consecutive pages of one space in one write.
  // Equal pages keep the batch's order (stable), in writes of their own.
  std::vector<size_t> order(images.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(images[a].space_id, images[a].page_no) <
           std::pair(images[b].space_id, images[b].page_no);
  });
  std::set<page::SpaceFile*> touched;
  std::vector<const uint8_t*> run;
  for (size_t i = 0; i < order.size();) {
    const auto& first = images[order[i]];
    run.assign(1, first.data);
    size_t j = i + 1;
    while (j < order.size() && images[order[j]].space_id == first.space_id &&
           images[order[j]].page_no == first.page_no + run.size()) {
      run.push_back(images[order[j]].data);
      ++j;
    }
    i = j;
    page::SpaceFile* space = space_of(first.space_id);
    if (space == nullptr) continue;  // dropped meanwhile
    SUBITO_RETURN_IF_ERROR(
        space->WritePages(first.page_no, run.data(), static_cast<uint32_t>(run.size())));
    touched.insert(space);
  }
  for (page::SpaceFile* s : touched) SUBITO_RETURN_IF_ERROR(s->Sync());
  return Status::OK();
}

}  // namespace subito::buffer
