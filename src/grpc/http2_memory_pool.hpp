#pragma once

#include <nghttp2/nghttp2.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace sluice::grpc {

/// The allocator of one nghttp2 session (nghttp2_mem): nghttp2 allocates per stream and per
/// frame (the stream, each queued frame, its header list, each decoded header), so a call
/// costs a dozen malloc/free pairs. Blocks of up to kMaxPooled bytes come back to
/// per-size-class stacks and serve the next call; what the stacks keep is bounded
/// (kSlots blocks a class, kRetainBytes in all), the rest goes back to the heap. The stacks
/// hold the blocks' addresses, so that taking one does not read the block itself: with many
/// connections a freed block has left the CPU's caches by the connection's next call, and a
/// free list's link in it would be a cache miss the allocation waits for. One session, one
/// thread: no locking.
class Http2MemoryPool {
 public:
  Http2MemoryPool();
  ~Http2MemoryPool();
  Http2MemoryPool(const Http2MemoryPool&) = delete;
  Http2MemoryPool& operator=(const Http2MemoryPool&) = delete;

  /// For nghttp2_session_server_new3(); valid as long as the pool.
  nghttp2_mem* mem() { return &mem_; }

  /// Bytes held in the free lists (for tests).
  std::size_t retainedBytes() const { return retained_bytes_; }

  static constexpr std::size_t kMaxPooled = 1024;
  static constexpr std::size_t kRetainBytes = 16 << 10;
  static constexpr std::size_t kSlots = 32;

 private:
  // Size classes 32, 64, ... kMaxPooled bytes; kLarge marks a block from the heap as is.
  static constexpr std::size_t kClasses = 6;
  static constexpr std::uint32_t kLarge = kClasses;

  void* allocate(std::size_t size);
  void release(void* ptr);
  void* reallocate(void* ptr, std::size_t size);

  static void* onMalloc(std::size_t size, void* user);
  static void onFree(void* ptr, void* user);
  static void* onCalloc(std::size_t count, std::size_t size, void* user);
  static void* onRealloc(void* ptr, std::size_t size, void* user);

  std::array<std::array<void*, kSlots>, kClasses> slots_;  // [class][0, held_[class])
  std::array<std::uint8_t, kClasses> held_{};
  std::size_t retained_bytes_ = 0;
  nghttp2_mem mem_{};
};

}  // namespace sluice::grpc
