//! What the window plays: the one coordinator ([`MultiPlayer`]) over one GPU or several
//! (in this process, or across MPI ranks); the window calls it through the few methods
//! here, which say what the window needs of it.
//!
//! There was a `Play` trait here, implemented by one GPU's [`Player`] and by
//! [`MultiPlayer`]. One GPU now plays through the coordinator too
//! ([`MultiPlayer::open_one`]), so the trait had one implementor left and went: it was no
//! seam for tests either (its `lead` is a whole [`Player`] on a device; the window's tests
//! drive the binary).

use crate::app::core::{PlayError, Player};
use crate::app::gpus::MultiPlayer;
use crate::app::overlay::{GpusOverlay, UiRequest};
use crate::app::script::Action;
use crate::cluster::Silent;

impl MultiPlayer {
    /// The player whose view the window edits and whose device presents: GPU 0's (its
    /// view and size reach every GPU's player: [`MultiPlayer::sync_view`]).
    pub(super) fn lead(&self) -> &Player {
        self.player(0)
    }
    /// [`MultiPlayer::lead`], to edit.
    pub(super) fn lead_mut(&mut self) -> &mut Player {
        self.player_mut(0)
    }
    /// Advances once: whether a frame was newly shown, and whether a new picture waits
    /// for the display (a frame presented, or the one on screen drawn again).
    pub(super) fn advance(&mut self) -> Result<(bool, bool), PlayError> {
        // A frame presented is a new picture (its own image, or another GPU's copied in);
        // so is the one on screen drawn again by GPU 0's player (a new view of one GPU, a
        // path tracer's refinement).
        self.tick()
            .map(|t| (t.shown.is_some(), t.shown.is_some() || t.redrawn))
    }
    /// The timeline and its rows for the overlay.
    pub(super) fn gpus_overlay(&mut self) -> GpusOverlay {
        self.overlay()
    }
    /// The picture on screen: the frame presented on GPU 0 (its own image, or the copy of
    /// another GPU's).
    pub(super) fn picture(&self) -> Option<&wgpu::Texture> {
        self.presented_image()
    }
    /// [`MultiPlayer::picture`], read back.
    pub(super) fn read_picture(&self) -> Result<crate::render::Image, PlayError> {
        self.read_presented()
            .map(|(width, height, rgba8)| crate::render::Image {
                width,
                height,
                rgba8,
                linear: Vec::new(),
            })
    }
    /// A key's action on the timeline: `Some` with what to say when handled here, `None`
    /// where GPU 0's player (its view, which reaches every GPU's player) and the window
    /// handle it.
    pub(super) fn timeline_action(&mut self, a: Action) -> Option<Option<String>> {
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
    /// An overlay request handled here rather than by GPU 0's player, as
    /// [`MultiPlayer::timeline_action`].
    pub(super) fn timeline_request(&mut self, r: &UiRequest) -> Option<Option<String>> {
        Some(match r {
            // While dragging, each value is a jump, and a frame GPU 0 has nearest it stands
            // in until the target is presented.
            UiRequest::Dragging(d) => {
                self.set_dragging(*d);
                None
            }
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
    /// The ranks that stopped answering (players in other processes: across MPI ranks);
    /// the run must end, naming them.
    pub(super) fn silent(&self) -> Option<&Silent> {
        self.workers().silent()
    }
    /// The window closes: players in other processes are told to stop (and their last
    /// reports taken), unless they stopped answering.
    pub(super) fn finish(&mut self) {
        if self.workers().silent().is_none() {
            self.workers_mut().finish();
        }
    }
}
