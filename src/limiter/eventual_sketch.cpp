#include "sluice/limiter/eventual_sketch.hpp"

#include <algorithm>
#include <limits>

#include "limiter/algorithms.hpp"

namespace sluice::eventual {

LimitParams sketchCellParams(const LimitParams& sketch) {
  LimitParams cell = sketch;
  cell.algorithm = Algorithm::kSlidingWindowCounter;
  cell.sketch = SketchParams{};
  return cell;
}

SketchRead sketchRead(const std::vector<const View*>& cells, const LimitParams& sketch,
                      Micros now) {
  SketchRead read;
  if (cells.empty()) {
    return read;
  }
  const LimitParams cell = sketchCellParams(sketch);
  read.curr = std::numeric_limits<std::int64_t>::max();
  read.prev = std::numeric_limits<std::int64_t>::max();
  for (const View* view : cells) {
    // merged() of a sliding_window_counter: b = the current window's total, c = the
    // previous one's (0 for a window the view does not hold).
    const BucketState state = merged(*view, cell, now);
    read.curr = std::min(read.curr, state.b);
    read.prev = std::min(read.prev, state.c);
  }
  return read;
}

SketchEvaluation decideSketch(const std::vector<const View*>& cells, const LimitParams& sketch,
                              Micros now, std::int64_t cost) {
  return evaluateSketch(sketch, sketchRead(cells, sketch, now), now, cost);
}

std::vector<std::int64_t> chargeSketch(const std::vector<View*>& cells, const LimitParams& sketch,
                                       Micros now, std::int64_t cost) {
  std::vector<std::int64_t> added(cells.size(), 0);
  if (cells.empty() || cost <= 0) {
    return added;
  }
  const LimitParams cell = sketchCellParams(sketch);
  const std::int64_t index = limiter_detail::floorDiv(now, sketch.window_us);
  std::int64_t own_min = std::numeric_limits<std::int64_t>::max();
  for (View* view : cells) {
    roll(*view, cell, now);
    own_min = std::min(own_min, view->cur.index == index ? view->cur.own : 0);
  }
  const std::int64_t raise_to = own_min + cost;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    WindowView& w = cells[i]->cur;
    if (w.own < raise_to) {
      added[i] = raise_to - w.own;
      w.own = raise_to;
    }
  }
  return added;
}

double sketchMargin(const std::vector<const View*>& cells, Micros now, const Tuning& tuning) {
  double margin = 0;
  for (const View* view : cells) {
    const Micros age = view->refreshed_at < 0 ? 0 : std::max<Micros>(now - view->refreshed_at, 0);
    const double unseen = tuning.safety * view->rate.globalPerSecond() * static_cast<double>(age) /
                          static_cast<double>(kMicrosPerSecond);
    margin = std::max(margin, static_cast<double>(view->tight_below) + unseen);
  }
  return margin;
}

bool sketchTooClose(const std::vector<const View*>& cells, const SketchEvaluation& evaluation,
                    Micros now, const Tuning& tuning) {
  return evaluation.outcome.allowed &&
         static_cast<double>(evaluation.outcome.remaining) < sketchMargin(cells, now, tuning);
}

Route sketchRoute(const std::vector<const View*>& cells, const LimitParams& sketch, Micros now,
                  std::int64_t cost, const Tuning& tuning, bool reachable) {
  if (!reachable) {
    return Route::kLocal;
  }
  const SketchEvaluation look = decideSketch(cells, sketch, now, 0);
  if (static_cast<double>(look.outcome.remaining) < sketchMargin(cells, now, tuning)) {
    return Route::kTight;
  }
  // Each cell counts the client's blind hits; the allowance is the sketch's (0.1 % of L).
  const std::int64_t allowance = blindAllowance(sketch, tuning);
  for (const View* view : cells) {
    if (blindView(*view, now, tuning) &&
        view->blind + std::max<std::int64_t>(cost, 0) > allowance) {
      return view->refreshed_at < 0 ? Route::kUnknown : Route::kStale;
    }
  }
  return Route::kLocal;
}

}  // namespace sluice::eventual
