//! What the window plays: one GPU's player or several GPUs' on one timeline, behind the
//! few calls the window makes of either.

use std::time::Duration;

use crate::app::core::{PathSel, Player};
use crate::app::gpus::MultiPlayer;

/// What plays: one GPU's player, or several GPUs' on one timeline.
// One value for the window's life: the size of the larger variant costs nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Play {
    /// One GPU's player.
    One(Player),
    /// Several GPUs' players on one timeline.
    Many(MultiPlayer),
}

impl Play {
    /// The player whose view the window edits and whose device presents: the one player, or
    /// GPU 0's (its view and size reach every GPU's player: [`MultiPlayer::sync_view`]).
    pub(super) fn lead(&self) -> &Player {
        match self {
            Play::One(p) => p,
            Play::Many(m) => m.player(0),
        }
    }
    pub(super) fn lead_mut(&mut self) -> &mut Player {
        match self {
            Play::One(p) => p,
            Play::Many(m) => m.player_mut(0),
        }
    }
    pub(super) fn scrub(&mut self, frame: u32) {
        match self {
            Play::One(p) => p.scrub(frame),
            Play::Many(m) => m.scrub(frame),
        }
    }
    pub(super) fn shown_frame(&self) -> Option<u32> {
        match self {
            Play::One(p) => p.shown_frame(),
            Play::Many(m) => m.shown_frame(),
        }
    }
    pub(super) fn scrub_pending(&self) -> bool {
        match self {
            Play::One(p) => p.scrub_pending(),
            Play::Many(m) => m.scrub_pending(),
        }
    }
    pub(super) fn toggle_path(&mut self) -> Result<PathSel, String> {
        match self {
            Play::One(p) => p.toggle_path(),
            Play::Many(m) => m.toggle_path(),
        }
    }
    pub(super) fn set_path(&mut self, sel: PathSel) -> Result<(), String> {
        match self {
            Play::One(p) => p.set_path(sel),
            Play::Many(m) => m.set_path(sel),
        }
    }
    pub(super) fn drain(&mut self, timeout: Duration) {
        match self {
            Play::One(p) => p.drain(timeout),
            Play::Many(m) => m.drain(timeout),
        }
    }
}
