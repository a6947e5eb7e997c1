#include "simulate/huge_page_heap.hpp"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

namespace sluice::simulate {
namespace {

constexpr std::uintptr_t kPage = 4096;

std::uintptr_t heapTop() { return reinterpret_cast<std::uintptr_t>(sbrk(0)); }

}  // namespace

HugePageHeap::HugePageHeap() {
  mallopt(M_TOP_PAD, static_cast<int>(kPadBytes));
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(2 * kPadBytes));
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kPadBytes));
  // What the heap holds already was touched with small pages: advise from its top on.
  advised_end_ = heapTop() & ~(kPage - 1);
  advise();
}

void HugePageHeap::advise() {
  const std::uintptr_t top = heapTop();
  if (top <= advised_end_) {
    return;
  }
  // A hint: when the kernel refuses (huge pages off), the replay runs as it would anyway.
  madvise(reinterpret_cast<void*>(advised_end_), top - advised_end_, MADV_HUGEPAGE);
  advised_end_ = top;
}

}  // namespace sluice::simulate
