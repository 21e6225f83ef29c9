//! What the window plays: one GPU's player or several GPUs' on one timeline, behind the one
//! trait the window calls ([`Play`]); the window itself never asks which it has.

use std::time::Duration;

use crate::app::core::{PathSel, PlayError, Player};
use crate::app::gpus::MultiPlayer;
use crate::app::overlay::{GpusOverlay, UiRequest};
use crate::app::script::Action;
use crate::cluster::Silent;

/// What plays in the window: one GPU's [`Player`], or several GPUs' [`MultiPlayer`] on one
/// timeline.
pub(super) trait Play {
    /// The player whose view the window edits and whose device presents: the one player, or
    /// GPU 0's (its view and size reach every GPU's player: [`MultiPlayer::sync_view`]).
    fn lead(&self) -> &Player;
    /// [`Play::lead`], to edit.
    fn lead_mut(&mut self) -> &mut Player;
    /// Timeline to `frame`.
    fn scrub(&mut self, frame: u32);
    /// The frame on screen.
    fn shown_frame(&self) -> Option<u32>;
    /// Whether a jump has not landed yet.
    fn scrub_pending(&self) -> bool;
    /// Flips between direct and host (every GPU).
    fn toggle_path(&mut self) -> Result<PathSel, String>;
    /// Switches to `sel` (every GPU), or says why not.
    fn set_path(&mut self, sel: PathSel) -> Result<(), String>;
    /// Lets reads finish (at most `timeout`).
    fn drain(&mut self, timeout: Duration);
    /// Advances once: whether a frame was newly shown, and whether a new image waits for
    /// the display.
    fn advance(&mut self) -> Result<(bool, bool), PlayError>;
    /// The several GPUs' timeline and rows for the overlay (`None`: one GPU, whose own
    /// player the overlay reads).
    fn gpus_overlay(&mut self) -> Option<GpusOverlay>;
    /// The picture on screen: the one player's image, or the frame presented on GPU 0 (its
    /// own image, or the copy of another GPU's).
    fn picture(&self) -> Option<&wgpu::Texture>;
    /// [`Play::picture`], read back.
    fn read_picture(&self) -> Result<crate::render::Image, PlayError>;
    /// A key's action on the timeline where it is not the lead player's: `Some` with what to
    /// say when handled here, `None` where the lead player (and the window) handle it.
    fn timeline_action(&mut self, a: Action) -> Option<Option<String>>;
    /// An overlay request handled here rather than by the lead player, as
    /// [`Play::timeline_action`].
    fn timeline_request(&mut self, r: &UiRequest) -> Option<Option<String>>;
    /// The ranks that stopped answering (players in other processes: across MPI ranks);
    /// the run must end, naming them.
    fn silent(&self) -> Option<&Silent> {
        None
    }
    /// The window closes: players in other processes are told to stop (and their last
    /// reports taken), unless they stopped answering.
    fn finish(&mut self) {}
}

impl Play for Player {
    fn lead(&self) -> &Player {
        self
    }
    fn lead_mut(&mut self) -> &mut Player {
        self
    }
    fn scrub(&mut self, frame: u32) {
        Player::scrub(self, frame);
    }
    fn shown_frame(&self) -> Option<u32> {
        Player::shown_frame(self)
    }
    fn scrub_pending(&self) -> bool {
        Player::scrub_pending(self)
    }
    fn toggle_path(&mut self) -> Result<PathSel, String> {
        Player::toggle_path(self)
    }
    fn set_path(&mut self, sel: PathSel) -> Result<(), String> {
        Player::set_path(self, sel)
    }
    fn drain(&mut self, timeout: Duration) {
        Player::drain(self, timeout);
    }
    fn advance(&mut self) -> Result<(bool, bool), PlayError> {
        self.tick().map(|t| (t.shown.is_some(), t.rendered))
    }
    fn gpus_overlay(&mut self) -> Option<GpusOverlay> {
        None
    }
    fn picture(&self) -> Option<&wgpu::Texture> {
        self.output()
    }
    fn read_picture(&self) -> Result<crate::render::Image, PlayError> {
        self.read_image()
    }
    fn timeline_action(&mut self, _a: Action) -> Option<Option<String>> {
        None
    }
    fn timeline_request(&mut self, _r: &UiRequest) -> Option<Option<String>> {
        None
    }
}

impl Play for MultiPlayer {
    fn lead(&self) -> &Player {
        self.player(0)
    }
    fn lead_mut(&mut self) -> &mut Player {
        self.player_mut(0)
    }
    fn scrub(&mut self, frame: u32) {
        MultiPlayer::scrub(self, frame);
    }
    fn shown_frame(&self) -> Option<u32> {
        MultiPlayer::shown_frame(self)
    }
    fn scrub_pending(&self) -> bool {
        MultiPlayer::scrub_pending(self)
    }
    fn toggle_path(&mut self) -> Result<PathSel, String> {
        MultiPlayer::toggle_path(self)
    }
    fn set_path(&mut self, sel: PathSel) -> Result<(), String> {
        MultiPlayer::set_path(self, sel)
    }
    fn drain(&mut self, timeout: Duration) {
        MultiPlayer::drain(self, timeout);
    }
    fn advance(&mut self) -> Result<(bool, bool), PlayError> {
        // A frame presented is a new picture (its own image, or another GPU's copied in).
        self.tick().map(|t| (t.shown.is_some(), t.shown.is_some()))
    }
    fn gpus_overlay(&mut self) -> Option<GpusOverlay> {
        Some(self.overlay())
    }
    fn picture(&self) -> Option<&wgpu::Texture> {
        self.presented_image()
    }
    fn read_picture(&self) -> Result<crate::render::Image, PlayError> {
        self.read_presented()
            .map(|(width, height, rgba8)| crate::render::Image {
                width,
                height,
                rgba8,
                linear: Vec::new(),
            })
    }
    // The timeline is the several GPUs'; the view is GPU 0's player's, which reaches every
    // GPU's player.
    fn timeline_action(&mut self, a: Action) -> Option<Option<String>> {
        Some(match a {
            Action::TogglePlay => {
                let on = !self.is_playing();
                self.set_playing(on);
                None
            }
            Action::Step(d) => {
                self.step(d);
                None
            }
            Action::ToggleDirect => Some(match MultiPlayer::toggle_path(self) {
                Ok(to) => format!(
                    "{} path: {}",
                    to.name(),
                    self.player(0).path_report(to).label
                ),
                Err(why) => format!("direct path unavailable: {why}"),
            }),
            Action::Reverse => {
                self.set_direction(self.direction().reversed());
                None
            }
            Action::CycleMode => {
                self.set_mode(self.mode().cycled());
                None
            }
            Action::ToggleAttribute(i) => {
                let shown = self.player(0).view().attributes.get(i).cloned().flatten();
                let a = shown?;
                MultiPlayer::set_attribute_shown(self, i, !a.enabled).err()
            }
            Action::First => {
                MultiPlayer::scrub(self, 0);
                None
            }
            Action::Last => {
                MultiPlayer::scrub(self, self.frame_count() - 1);
                None
            }
            _ => return None,
        })
    }
    fn timeline_request(&mut self, r: &UiRequest) -> Option<Option<String>> {
        Some(match r {
            // While dragging, each value is a jump (no nearest frame stands in).
            UiRequest::Dragging(_) => None,
            UiRequest::SetSpeed(s) => {
                self.set_speed(*s);
                None
            }
            UiRequest::SetMode(m) => {
                self.set_mode(*m);
                None
            }
            UiRequest::SetAttribute(i, on) => MultiPlayer::set_attribute_shown(self, *i, *on).err(),
            UiRequest::ShowDatasetAttribute(a, on) => {
                MultiPlayer::set_dataset_attribute_shown(self, *a, *on).err()
            }
            _ => return None,
        })
    }
    fn silent(&self) -> Option<&Silent> {
        self.workers().silent()
    }
    fn finish(&mut self) {
        if self.workers().silent().is_none() {
            self.workers_mut().finish();
        }
    }
}
