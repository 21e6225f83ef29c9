//! Playback: which frames to read next and which to show (the scheduler), the same over
//! several GPUs (`multi`: alternate-frame rendering), and metrics.

pub mod metrics;
pub mod multi;
pub mod rate;
pub mod scheduler;

pub use scheduler::{
    Direction, FrameState, Plan, PlayMode, PlaybackConfig, Scheduler, SchedulerStats,
};
