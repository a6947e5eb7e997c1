#pragma once

#include <cstdint>
#include <vector>

#include "sluice/limiter/eventual.hpp"
#include "sluice/limiter/sketch.hpp"

/// The pure part of `algorithm: sketch` with `consistency: eventual` (docs/eventual.md,
/// "sketch"): a count-min sketch whose every cell is a grow-only counter with one entry per
/// writer (sidecar, or region), exactly like a fixed_window key. Each sidecar keeps its own
/// conservatively updated sketch of its admissions (its entries); the shared sketch is their
/// cell-wise sum; a client's counts are the minimum over its rows of the summed cells.
///
/// A client's d cells are d Views (one per row, eventual.hpp), merged with the same merge()
/// as counters, with sketchCellParams(): a replayed or reordered reading changes nothing, and
/// every entry's value is a lower bound of the real one.
///
/// Bound: each writer's sketch is an upper bound of its own admissions of every client mapped
/// to a cell (conservative update raises all the client's own cells to its own minimum plus
/// the cost), so the sum over writers is an upper bound of the client's global count, and so
/// is the minimum over rows. The sketch over-counts (collisions, and the sum of per-writer
/// sketches is looser than one shared conservative sketch), never under-counts, once every
/// writer's entries are read; before that, a view lacks at most what the other writers added
/// since its last reading, which the tightening covers (sketchMargin()).
namespace sluice::eventual {

/// The parameters of one cell: a sliding_window_counter of the sketch's L and W (the cell
/// keeps the current and the previous window, as the strict sketch keeps two).
LimitParams sketchCellParams(const LimitParams& sketch);

/// The client's counts at `now` from its cells (rolled to `now`): C = min over rows of the
/// current window's merged totals, P = the same for the previous window.
SketchRead sketchRead(const std::vector<const View*>& cells, const LimitParams& sketch, Micros now);

/// The decision of a request of `cost` from the cells (no change to them): the strict
/// sketch's evaluation on sketchRead().
SketchEvaluation decideSketch(const std::vector<const View*>& cells, const LimitParams& sketch,
                              Micros now, std::int64_t cost);

/// Records this sidecar's admission of `cost` in its own sketch, conservatively: with
/// m = min over rows of its own count in the current window, every cell's own count becomes
/// max(own, m + cost). Returns the hits added to each cell (same order; their sum is what the
/// next sync has to send).
std::vector<std::int64_t> chargeSketch(const std::vector<View*>& cells, const LimitParams& sketch,
                                       Micros now, std::int64_t cost);

/// The tightening margin of a client (hits): the largest of its cells' margins (each cell's
/// tightenAt() from its own global rate, plus what that rate adds over the cell's age, times
/// Tuning::safety). The client's estimate min_r(cell_r) grows no faster than its fastest cell
/// within a horizon, so this covers what the other writers may add unseen.
double sketchMargin(const std::vector<const View*>& cells, Micros now, const Tuning& tuning);

/// True when an allowed decision leaves less than sketchMargin(): decide by a round trip.
bool sketchTooClose(const std::vector<const View*>& cells, const SketchEvaluation& evaluation,
                    Micros now, const Tuning& tuning);

/// How a request on this client must be decided: kTight when a check (cost 0) already leaves
/// less than the margin, else the first cell's route that is not local (unknown, stale: the
/// blind allowance is the sketch's, 0.1 % of L, counted in every cell), else kLocal.
Route sketchRoute(const std::vector<const View*>& cells, const LimitParams& sketch, Micros now,
                  std::int64_t cost, const Tuning& tuning, bool reachable);

}  // namespace sluice::eventual
