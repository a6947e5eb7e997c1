#include "http/response_queue.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sluice::http {
namespace {

const std::chrono::steady_clock::time_point kStart{};

void answer(QueuedResponse& entry, int status) {
  entry.answered = true;
  entry.ready = true;
  entry.response.status = status;
  entry.response.body = std::to_string(status);
}

TEST(ResponseQueueTest, PlacesAreNumberedInRequestOrderAndFoundById) {
  ResponseQueue queue;
  const std::uint64_t first = queue.push(true, 11, kStart).id;
  const std::uint64_t second = queue.push(true, 11, kStart).id;
  EXPECT_EQ(second, first + 1);
  ASSERT_NE(queue.find(second), nullptr);
  EXPECT_EQ(queue.find(second)->id, second);
  EXPECT_EQ(queue.find(second + 1), nullptr);
  EXPECT_EQ(queue.size(), 2u);
}

TEST(ResponseQueueTest, WritesOnlyTheReadyAnswersAtTheFront) {
  ResponseQueue queue;
  QueuedResponse& first = queue.push(true, 11, kStart);
  QueuedResponse& second = queue.push(true, 11, kStart);
  answer(second, 201);
  EXPECT_FALSE(queue.frontReady());
  std::string out;
  EXPECT_EQ(queue.writeReady(out, false), 0u);
  EXPECT_TRUE(out.empty());

  answer(first, 200);
  EXPECT_TRUE(queue.frontReady());
  EXPECT_EQ(queue.writeReady(out, false), 2u);
  EXPECT_LT(out.find("HTTP/1.1 200 OK"), out.find("HTTP/1.1 201 Created")) << out;
  EXPECT_TRUE(queue.popWritten(2));
  EXPECT_TRUE(queue.empty());
}

TEST(ResponseQueueTest, StopsAfterAnAnswerThatClosesTheConnection) {
  ResponseQueue queue;
  answer(queue.push(false, 11, kStart), 400);
  answer(queue.push(true, 11, kStart), 200);
  std::string out;
  EXPECT_EQ(queue.writeReady(out, false), 1u);
  EXPECT_NE(out.find("Connection: close"), std::string::npos) << out;
  EXPECT_FALSE(queue.popWritten(1));
  EXPECT_EQ(queue.size(), 1u);
}

TEST(ResponseQueueTest, WhileDrainingTheLastPlaceClosesTheConnection) {
  ResponseQueue queue;
  answer(queue.push(true, 11, kStart), 200);
  answer(queue.push(true, 11, kStart), 200);
  std::string out;
  EXPECT_EQ(queue.writeReady(out, true), 2u);
  EXPECT_EQ(out.find("Connection: close"), out.rfind("Connection: close")) << out;
  EXPECT_GT(out.find("Connection: close"), out.find("\r\n\r\n")) << "only the second closes";
  EXPECT_FALSE(queue.popWritten(2));
}

TEST(ResponseQueueTest, WrittenPlacesAreNoLongerFound) {
  ResponseQueue queue;
  QueuedResponse& entry = queue.push(true, 11, kStart);
  const std::uint64_t id = entry.id;
  answer(entry, 200);
  std::string out;
  ASSERT_EQ(queue.writeReady(out, false), 1u);
  EXPECT_TRUE(queue.popWritten(1));
  EXPECT_EQ(queue.find(id), nullptr);
  EXPECT_EQ(queue.push(true, 11, kStart).id, id + 1);
}

}  // namespace
}  // namespace sluice::http
