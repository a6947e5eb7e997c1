#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace sluice {

/// Objects that keep their storage (the capacity of their vectors and strings) from one use
/// to the next, for state that lives from a call until its asynchronous answer: take() one,
/// refill it, hand the pointer to the answer's callback, give() it back there. A callback
/// that captures a pool pointer and `this` fits std::function's small buffer, so neither the
/// state nor the callback allocates once the pool is warm.
///
/// The pool owns every object it made: one that is never given back (a callback dropped
/// without running, at shutdown) is freed with the pool. Not thread-safe: one pool per
/// thread or per single-threaded owner. Objects are handed out as they were given back;
/// the caller resets what it does not overwrite.
template <typename T>
class ObjectPool {
 public:
  T* take() {
    if (free_.empty()) {
      all_.push_back(std::make_unique<T>());
      free_.reserve(all_.capacity());  // give() never allocates
      return all_.back().get();
    }
    T* object = free_.back();
    free_.pop_back();
    return object;
  }

  void give(T* object) { free_.push_back(object); }

  /// Objects made so far (tests).
  std::size_t size() const { return all_.size(); }

 private:
  std::vector<std::unique_ptr<T>> all_;
  std::vector<T*> free_;
};

}  // namespace sluice
