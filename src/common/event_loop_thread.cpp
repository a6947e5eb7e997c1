#include "sluice/common/event_loop_thread.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <utility>

namespace sluice {

namespace net = boost::asio;

namespace {

class AsioTimer final : public Timer {
 public:
  explicit AsioTimer(net::io_context& io) : timer_(io) {}
  ~AsioTimer() override {
    *alive_ = false;
    cancel();
  }

  void schedule(std::chrono::microseconds delay, std::function<void()> fn) override {
    // A handler already queued when the timer is re-armed or cancelled sees a newer
    // generation and does nothing.
    const std::uint64_t generation = ++generation_;
    timer_.expires_after(delay);
    timer_.async_wait([this, generation, fn = std::move(fn),
                       alive = alive_](const boost::system::error_code& ec) {
      if (!ec && *alive && generation == generation_) {
        fn();
      }
    });
  }
  void cancel() override {
    ++generation_;
    timer_.cancel();
  }

 private:
  net::steady_timer timer_;
  std::uint64_t generation_ = 0;
  // Guards a handler that runs after the timer is gone (io_context polled after destruction).
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

 public:
  AsioTimer(const AsioTimer&) = delete;
  AsioTimer& operator=(const AsioTimer&) = delete;
};

}  // namespace

void AsioExecutor::post(std::function<void()> fn) { net::post(io_, std::move(fn)); }

TimerPtr AsioExecutor::makeTimer() { return std::make_unique<AsioTimer>(io_); }

EventLoopThread::EventLoopThread()
    : io_(std::make_unique<net::io_context>(1)), executor_(std::make_unique<AsioExecutor>(*io_)) {}

EventLoopThread::~EventLoopThread() { stop(); }

void EventLoopThread::start() {
  if (started_) {
    return;
  }
  started_ = true;
  thread_ = std::thread([this] {
    auto guard = net::make_work_guard(*io_);
    while (!stopped_.load(std::memory_order_acquire)) {
      io_->run_for(std::chrono::milliseconds(100));
    }
  });
}

void EventLoopThread::stop() {
  if (stopped_.exchange(true)) {
    return;
  }
  io_->stop();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void EventLoopThread::poll() {
  io_->restart();
  io_->poll();
}

}  // namespace sluice
