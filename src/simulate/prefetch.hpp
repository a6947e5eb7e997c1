#pragma once

namespace sluice::simulate {

/// Asks for the cache line at `p`. The empty asm keeps the request: a loop whose only
/// effect is a prefetch is otherwise removed by the optimizer.
inline void prefetchLine(const void* p) {
  __builtin_prefetch(p);
  asm volatile("" : : "r"(p) : "memory");
}

}  // namespace sluice::simulate
