//! Playback: which frames to read next and which to show (the scheduler); later the
//! playback clock, prefetch and metrics.

pub mod metrics;
pub mod scheduler;

pub use scheduler::{
    Direction, FrameState, Plan, PlayMode, PlaybackConfig, Scheduler, SchedulerStats,
};
