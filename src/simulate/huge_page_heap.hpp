#pragma once

#include <cstdint>

namespace sluice::simulate {

/// The replay's heap on transparent huge pages, where the kernel offers them on request
/// (`/sys/kernel/mm/transparent_hugepage/enabled` is `madvise`, Debian's default; with
/// `always` they are used anyway, with `never` this changes nothing). A replay looks up
/// hundreds of thousands of buckets and identities at random: with 4 KiB pages nearly every
/// lookup also misses the processor's address translation cache, with 2 MiB pages a few
/// dozen pages hold them all. The heap grows in steps of kPadBytes (glibc's M_TOP_PAD),
/// blocks of any size stay in it (M_MMAP_THRESHOLD), and each new step is advised
/// (madvise MADV_HUGEPAGE) before the replay touches it. The process's memory grows by at
/// most one step more than it uses. For `sluice simulate` only: a process of its own.
class HugePageHeap {
 public:
  static constexpr std::uintptr_t kPadBytes = std::uintptr_t{64} << 20;
  HugePageHeap();
  /// Advises what the heap has grown by since the last call: a pointer compare when it
  /// has not (call it every few thousand requests).
  void advise();

 private:
  std::uintptr_t advised_end_ = 0;
};

}  // namespace sluice::simulate
