#include "simulate/huge_page_heap.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace sluice::simulate {
namespace {

/// The VmFlags of the mapping that holds `address`, from /proc/self/smaps ("" if none).
std::string flagsOf(const void* address) {
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t from = 0;
    std::uintptr_t to = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> from >> dash >> to && dash == '-') {
      inside = from <= at && at < to;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(HugePageHeapTest, AdvisesWhatTheHeapGrowsBy) {
  if (!std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled")) {
    GTEST_SKIP() << "this kernel has no transparent huge pages (the advice is a hint)";
  }
  HugePageHeap heap;
  // Large blocks stay in the heap, and the heap grows: what it grew by is advised.
  std::vector<std::unique_ptr<char[]>> blocks;
  for (int i = 0; i < 8; ++i) {
    blocks.push_back(std::make_unique<char[]>(1 << 20));
  }
  heap.advise();
  const std::string flags = flagsOf(blocks.back().get());
  ASSERT_FALSE(flags.empty()) << "no mapping holds the block";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  heap.advise();  // nothing grew: nothing to do
}

}  // namespace
}  // namespace sluice::simulate
