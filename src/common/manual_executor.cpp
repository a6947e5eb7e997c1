#include "sluice/common/manual_executor.hpp"

#include <algorithm>
#include <utility>

namespace sluice {

class ManualExecutor::ManualTimer final : public Timer {
 public:
  ManualTimer(ManualExecutor& executor, std::shared_ptr<TimerState> state)
      : executor_(executor), state_(std::move(state)) {}
  ~ManualTimer() override { cancel(); }

  void schedule(std::chrono::microseconds delay, std::function<void()> fn) override {
    std::lock_guard lock(executor_.mutex_);
    state_->armed = true;
    state_->deadline = executor_.clock_.nowMicros() + std::max<Micros>(delay.count(), 0);
    state_->order = executor_.order_++;
    state_->fn = std::move(fn);
  }
  void cancel() override {
    std::lock_guard lock(executor_.mutex_);
    state_->armed = false;
    state_->fn = nullptr;
  }

 private:
  ManualExecutor& executor_;
  std::shared_ptr<TimerState> state_;
};

void ManualExecutor::post(std::function<void()> fn) {
  std::lock_guard lock(mutex_);
  posted_.push_back(std::move(fn));
}

TimerPtr ManualExecutor::makeTimer() {
  auto state = std::make_shared<TimerState>();
  std::lock_guard lock(mutex_);
  timers_.push_back(state);
  return std::make_unique<ManualTimer>(*this, std::move(state));
}

std::shared_ptr<ManualExecutor::TimerState> ManualExecutor::nextDue(Micros until) {
  std::shared_ptr<TimerState> best;
  std::erase_if(timers_, [](const std::weak_ptr<TimerState>& t) { return t.expired(); });
  for (const auto& weak : timers_) {
    auto state = weak.lock();
    if (state && state->armed && state->deadline <= until &&
        (!best || state->deadline < best->deadline ||
         (state->deadline == best->deadline && state->order < best->order))) {
      best = std::move(state);
    }
  }
  return best;
}

std::size_t ManualExecutor::runReady() {
  std::size_t ran = 0;
  for (;;) {
    std::function<void()> fn;
    {
      std::lock_guard lock(mutex_);
      if (!posted_.empty()) {
        fn = std::move(posted_.front());
        posted_.pop_front();
      } else if (auto due = nextDue(clock_.nowMicros())) {
        due->armed = false;
        fn = std::move(due->fn);
        due->fn = nullptr;
      } else {
        return ran;
      }
    }
    if (fn) {
      fn();
    }
    ++ran;
  }
}

void ManualExecutor::advance(std::chrono::microseconds by) {
  const Micros until = clock_.nowMicros() + by.count();
  runReady();
  for (;;) {
    Micros next = until;
    {
      std::lock_guard lock(mutex_);
      if (auto due = nextDue(until)) {
        next = std::max(due->deadline, clock_.nowMicros());
      }
    }
    clock_.set(next);
    runReady();
    if (next >= until) {
      return;
    }
  }
}

std::size_t ManualExecutor::pendingTimers() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(std::count_if(timers_.begin(), timers_.end(), [](const auto& t) {
    auto state = t.lock();
    return state && state->armed;
  }));
}

}  // namespace sluice
