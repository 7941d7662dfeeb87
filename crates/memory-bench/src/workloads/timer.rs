//! Timing a workload's operations one by one, with the store round trips each makes.

use std::time::Instant;

use crate::BenchResult;
use crate::backends::Stores;
use crate::harness::{Recorder, Stats, round};

/// Times operations one at a time and counts the store round trips made during each, so the
/// untimed setup between operations (preloading, checking, clearing) never counts.
#[derive(Debug)]
pub(super) struct Timer {
    recorder: Recorder,
    round_trips: u64,
}

impl Timer {
    /// A timer for about `ops` operations.
    pub(super) fn new(ops: usize) -> Self {
        Self {
            recorder: Recorder::new(ops),
            round_trips: 0,
        }
    }

    /// Runs `op` as one timed operation: its duration is recorded, and so are the round trips
    /// `stores` made from right before it was called to right after it finished.
    pub(super) async fn time<T>(
        &mut self,
        stores: &Stores,
        op: impl AsyncFnOnce() -> BenchResult<T>,
    ) -> BenchResult<T> {
        let mark = stores.round_trips();
        let started = Instant::now();
        let result = op().await;
        self.recorder.push(started.elapsed());
        self.round_trips += stores.round_trips().saturating_sub(mark);
        result
    }

    /// The statistics of the timed operations, and their round trips.
    pub(super) fn finish(self) -> Timed {
        Timed {
            stats: self.recorder.finish(),
            round_trips: self.round_trips,
        }
    }
}

/// What a [`Timer`] measured.
#[derive(Debug)]
pub(super) struct Timed {
    /// The operations' statistics.
    pub(super) stats: Stats,
    round_trips: u64,
}

impl Timed {
    /// Round trips per timed operation, rounded to 0.01 (`round_trips_per_op`).
    pub(super) fn round_trips_per_op(&self) -> f64 {
        self.round_trips_per(self.stats.ops)
    }

    /// Round trips per one of `units` (e.g. imports made of several timed operations), rounded
    /// to 0.01.
    pub(super) fn round_trips_per(&self, units: usize) -> f64 {
        per_op(self.round_trips, units)
    }
}

/// `round_trips` over `ops`, rounded to 0.01; 0 for no operation.
pub(super) fn per_op(round_trips: u64, ops: usize) -> f64 {
    if ops == 0 {
        0.0
    } else {
        round(round_trips as f64 / ops as f64, 2)
    }
}

/// The store round trips of the timed operations alone, for a loop that times more than the
/// store's call (see `server_cost`): [`start`](Trips::start) right before an operation,
/// [`stop`](Trips::stop) right after it.
pub(super) struct Trips<'a> {
    stores: &'a Stores,
    total: u64,
    mark: u64,
}

impl<'a> Trips<'a> {
    /// Counting on `stores`, from zero.
    pub(super) fn new(stores: &'a Stores) -> Self {
        Self {
            stores,
            total: 0,
            mark: 0,
        }
    }

    /// Marks the start of an operation.
    pub(super) fn start(&mut self) {
        self.mark = self.stores.round_trips();
    }

    /// Counts the round trips since [`start`](Trips::start).
    pub(super) fn stop(&mut self) {
        self.total += self.stores.round_trips().saturating_sub(self.mark);
    }

    /// Round trips per operation, rounded to 0.01.
    pub(super) fn per_op(&self, ops: usize) -> f64 {
        per_op(self.total, ops)
    }
}
