#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "sluice/common/executor.hpp"

namespace boost::asio {
class io_context;
}

namespace sluice {

/// The real Executor: functions and timers on an Asio io_context (steady_timer). Does not own
/// the io_context; whoever runs it provides the thread.
class AsioExecutor final : public Executor {
 public:
  explicit AsioExecutor(boost::asio::io_context& io) : io_(io) {}
  void post(std::function<void()> fn) override;
  TimerPtr makeTimer() override;
  boost::asio::io_context& io() { return io_; }

 private:
  boost::asio::io_context& io_;
};

/// An io_context with a thread of its own that runs it, and its AsioExecutor: the home of a
/// background component (the eventual engine's sync loop and its Redis connections).
class EventLoopThread {
 public:
  EventLoopThread();
  /// Stops and joins the thread (stop()).
  ~EventLoopThread();
  EventLoopThread(const EventLoopThread&) = delete;
  EventLoopThread& operator=(const EventLoopThread&) = delete;

  /// Starts the thread (once).
  void start();
  /// Ends the loop and joins the thread (idempotent; not from the loop's own thread). Work
  /// still queued is left undone; poll() runs what is ready afterwards.
  void stop();
  /// Runs the handlers ready now on the calling thread (after stop()).
  void poll();
  /// True on the loop's thread.
  bool onLoopThread() const { return std::this_thread::get_id() == thread_.get_id(); }

  Executor& executor() { return *executor_; }
  boost::asio::io_context& io() { return *io_; }

 private:
  std::unique_ptr<boost::asio::io_context> io_;
  std::unique_ptr<AsioExecutor> executor_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
  bool started_ = false;
};

}  // namespace sluice
