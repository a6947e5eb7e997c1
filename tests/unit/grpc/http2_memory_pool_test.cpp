#include "grpc/http2_memory_pool.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace sluice::grpc {
namespace {

class Http2MemoryPoolTest : public ::testing::Test {
 protected:
  void* allocate(std::size_t size) { return mem->malloc(size, mem->mem_user_data); }
  void release(void* ptr) { mem->free(ptr, mem->mem_user_data); }
  void* reallocate(void* ptr, std::size_t size) {
    return mem->realloc(ptr, size, mem->mem_user_data);
  }
  void* allocateZeroed(std::size_t count, std::size_t size) {
    return mem->calloc(count, size, mem->mem_user_data);
  }

  Http2MemoryPool pool;
  nghttp2_mem* mem = pool.mem();
};

TEST_F(Http2MemoryPoolTest, AFreedBlockServesTheNextAllocationOfItsSizeClass) {
  void* first = allocate(100);
  release(first);
  EXPECT_EQ(pool.retainedBytes(), 128u);
  EXPECT_EQ(allocate(120), first);  // 100 and 120 bytes: both the 128-byte class
  EXPECT_EQ(pool.retainedBytes(), 0u);
  void* other = allocate(20);  // another class: a block of its own
  EXPECT_NE(other, first);
  release(other);
  release(first);
}

TEST_F(Http2MemoryPoolTest, KeepsNoMoreFreedBlocksThanItsBound) {
  std::vector<void*> blocks;
  for (int i = 0; i < 100; ++i) {
    blocks.push_back(allocate(Http2MemoryPool::kMaxPooled));
  }
  for (void* block : blocks) {
    release(block);
  }
  EXPECT_EQ(pool.retainedBytes(), Http2MemoryPool::kRetainBytes);
}

TEST_F(Http2MemoryPoolTest, ALargeBlockGoesBackToTheHeap) {
  void* large = allocate(Http2MemoryPool::kMaxPooled + 1);
  ASSERT_NE(large, nullptr);
  std::memset(large, 'x', Http2MemoryPool::kMaxPooled + 1);
  release(large);
  EXPECT_EQ(pool.retainedBytes(), 0u);
  release(nullptr);
}

TEST_F(Http2MemoryPoolTest, ReallocKeepsTheContentsAcrossClassesAndTheHeap) {
  const std::string text = "0123456789";
  auto* ptr = static_cast<char*>(allocate(text.size()));
  std::memcpy(ptr, text.data(), text.size());
  EXPECT_EQ(reallocate(ptr, 32), ptr);  // still fits its class
  for (std::size_t size : {500u, 5000u, 3000u, 40u, 12u}) {
    ptr = static_cast<char*>(reallocate(ptr, size));
    ASSERT_NE(ptr, nullptr);
    EXPECT_EQ(std::string(ptr, text.size()), text) << size;
  }
  EXPECT_EQ(reallocate(ptr, 0), nullptr);  // freed, as realloc(p, 0) does
  auto* fresh = static_cast<char*>(reallocate(nullptr, 64));
  ASSERT_NE(fresh, nullptr);
  release(fresh);
}

TEST_F(Http2MemoryPoolTest, CallocZeroesARecycledBlockAndRefusesAnOverflow) {
  auto* dirty = static_cast<unsigned char*>(allocate(64));
  std::memset(dirty, 0xff, 64);
  release(dirty);
  auto* zeroed = static_cast<unsigned char*>(allocateZeroed(8, 8));
  ASSERT_EQ(zeroed, dirty);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(zeroed[i], 0) << i;
  }
  release(zeroed);
  EXPECT_EQ(allocateZeroed(std::numeric_limits<std::size_t>::max() / 2, 4), nullptr);
}

TEST_F(Http2MemoryPoolTest, AnNghttp2SessionRunsOnIt) {
  nghttp2_session_callbacks* callbacks = nullptr;
  ASSERT_EQ(nghttp2_session_callbacks_new(&callbacks), 0);
  nghttp2_session* session = nullptr;
  ASSERT_EQ(nghttp2_session_server_new3(&session, callbacks, nullptr, nullptr, pool.mem()), 0);
  nghttp2_session_callbacks_del(callbacks);
  ASSERT_EQ(nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, nullptr, 0), 0);
  const std::uint8_t* data = nullptr;
  EXPECT_EQ(nghttp2_session_mem_send(session, &data), 9);  // an empty SETTINGS frame
  nghttp2_session_del(session);
}

}  // namespace
}  // namespace sluice::grpc
