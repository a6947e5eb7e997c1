#include "grpc/http2_memory_pool.hpp"

#include <bit>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace sluice::grpc {
namespace {

/// Each block starts with its size class; the payload keeps malloc's 16-byte alignment.
constexpr std::size_t kHeader = 16;

std::size_t classOf(std::size_t size) {
  // 0..32 -> 0, 33..64 -> 1, ... 513..1024 -> 5
  return static_cast<std::size_t>(std::bit_width((size - 1) | 31)) - 5;
}

constexpr std::size_t classSize(std::size_t index) { return std::size_t{32} << index; }

std::uint32_t& headerOf(void* payload) {
  return *reinterpret_cast<std::uint32_t*>(static_cast<char*>(payload) - kHeader);
}

}  // namespace

static_assert(classSize(5) == Http2MemoryPool::kMaxPooled);

Http2MemoryPool::Http2MemoryPool() {
  mem_.mem_user_data = this;
  mem_.malloc = onMalloc;
  mem_.free = onFree;
  mem_.calloc = onCalloc;
  mem_.realloc = onRealloc;
}

Http2MemoryPool::~Http2MemoryPool() {
  for (std::size_t index = 0; index < kClasses; ++index) {
    for (std::size_t slot = 0; slot < held_[index]; ++slot) {
      std::free(static_cast<char*>(slots_[index][slot]) - kHeader);
    }
  }
}

void* Http2MemoryPool::allocate(std::size_t size) {
  std::uint32_t index = kLarge;
  std::size_t bytes = size;
  if (size <= kMaxPooled) {
    index = static_cast<std::uint32_t>(classOf(size));
    if (held_[index] != 0) {
      retained_bytes_ -= classSize(index);
      return slots_[index][--held_[index]];
    }
    bytes = classSize(index);
  }
  void* raw = std::malloc(kHeader + bytes);
  if (raw == nullptr) {
    return nullptr;
  }
  *static_cast<std::uint32_t*>(raw) = index;
  return static_cast<char*>(raw) + kHeader;
}

void Http2MemoryPool::release(void* ptr) {
  if (ptr == nullptr) {
    return;
  }
  const std::uint32_t index = headerOf(ptr);
  if (index != kLarge && held_[index] < kSlots &&
      retained_bytes_ + classSize(index) <= kRetainBytes) {
    slots_[index][held_[index]++] = ptr;
    retained_bytes_ += classSize(index);
    return;
  }
  std::free(static_cast<char*>(ptr) - kHeader);
}

void* Http2MemoryPool::reallocate(void* ptr, std::size_t size) {
  if (ptr == nullptr) {
    return allocate(size);
  }
  if (size == 0) {
    release(ptr);
    return nullptr;
  }
  const std::uint32_t index = headerOf(ptr);
  if (index == kLarge && size > kMaxPooled) {
    void* raw = std::realloc(static_cast<char*>(ptr) - kHeader, kHeader + size);
    return raw == nullptr ? nullptr : static_cast<char*>(raw) + kHeader;
  }
  if (index != kLarge && size <= classSize(index)) {
    return ptr;
  }
  void* moved = allocate(size);
  if (moved == nullptr) {
    return nullptr;
  }
  // A large block is over kMaxPooled bytes; a pooled one holds its class's size.
  const std::size_t old_bytes = index == kLarge ? size : classSize(index);
  std::memcpy(moved, ptr, old_bytes < size ? old_bytes : size);
  release(ptr);
  return moved;
}

void* Http2MemoryPool::onMalloc(std::size_t size, void* user) {
  return static_cast<Http2MemoryPool*>(user)->allocate(size);
}

void Http2MemoryPool::onFree(void* ptr, void* user) {
  static_cast<Http2MemoryPool*>(user)->release(ptr);
}

void* Http2MemoryPool::onCalloc(std::size_t count, std::size_t size, void* user) {
  if (size != 0 && count > std::numeric_limits<std::size_t>::max() / size) {
    return nullptr;
  }
  void* ptr = static_cast<Http2MemoryPool*>(user)->allocate(count * size);
  if (ptr != nullptr) {
    std::memset(ptr, 0, count * size);
  }
  return ptr;
}

void* Http2MemoryPool::onRealloc(void* ptr, std::size_t size, void* user) {
  return static_cast<Http2MemoryPool*>(user)->reallocate(ptr, size);
}

}  // namespace sluice::grpc
