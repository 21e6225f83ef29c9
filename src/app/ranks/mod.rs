//! `play` across MPI ranks: the coordinator's GPUs are ranks' GPUs ([`RankWorkers`], one
//! more transport behind [`crate::app::gpus::Workers`]). Every rank plays `G` GPUs (one,
//! its local rank's, or those `--gpus` names on its host); worker `j` is rank `j / G`'s GPU
//! `j % G` (its *slot*), each a player over the frames it owns (alternate frames over the
//! `R × G` workers). A rank other than 0 plays its slots as rank 0's control messages say
//! ([`serve`]); rank 0 plays its own slots in its own process and runs the one coordinator
//! ([`crate::app::gpus::MultiPlayer`], its [`crate::pipeline::multi::MultiScheduler`]), which
//! presents strictly in order, jumps exactly, switches every rank's path and gives every
//! rank the view, as it does for the GPUs of one process. One process (N = 1,
//! [`crate::cluster::Solo`]) runs through the same code. The code is split by role:
//! `messages` (what travels), `coordinator` (rank 0's [`RankWorkers`]) and `serve` (the
//! other ranks' loop).
//!
//! The messages: rank 0 sends each rank small control messages, each naming its slot (a
//! jump, play or pause, the path, the view, "go on" once the display took an image,
//! "report", "stop", and a heartbeat); a rank sends rank 0 a hello (its GPUs: adapter, ring
//! slots, paths, frame times), then reports per slot: its damaged frames and figures at least every [`REPORT_EVERY`], and with each frame it
//! has rendered the frame's finished image; each report carries the faults its player met
//! since the last (rank 0's report lists them with the rank and host) and the last error it
//! played on past. In a long run (`--soak`,
//! [`crate::app::soak::run`]) rank 0 asks each rank to sample its own process
//! (`Control::Sample`) and the sample comes back with the rank's next report. A rank renders up to [`AHEAD`] frames ahead of
//! rank 0 letting them go (rank 0 keeps their images in order and hands the coordinator
//! one at a time, as a GPU of one process holds its one finished frame), so a rank's
//! renders overlap the presentation of the others' frames rather than waiting for each.
//! Every jump (and view change, which re-points every GPU) counts up a generation; a report
//! of an older generation (a frame rendered before the jump reached the rank) is dropped.
//!
//! Nobody waits for ever: a rank that sends nothing for `timeout` is named
//! ([`crate::cluster::Silent`]) by rank 0, and a rank that hears nothing from rank 0 for
//! twice that names rank 0. Control messages and reports without an image are blocking
//! point-to-point sends of a few hundred bytes (sent eagerly by MPI). A report with an
//! image is posted with an immediate send ([`Ranks::post`], `MPI_Isend`) and then driven
//! until rank 0 has it, at most `timeout` (`Served::drive_sends`): Open MPI's shared-memory
//! transport moves a large message only while the sender is inside MPI calls, so an image
//! left in flight while the rank rendered on took 120 ms to arrive on an H100 (8 MB at
//! 1920x1080; play 0.41–0.47 × one process) against 15–19 ms sent at once. One not taken
//! within `timeout` names rank 0 (and the run ends then, the send left to MPI), and a rank
//! told to stop waits (at most `timeout`) for its sends under way.
//!
//! The view a rank is given is rank 0's whole view, as [`crate::app::gpus::MultiPlayer::sync_view`]
//! gives the GPUs of one process: the camera, the render settings and the size
//! (`Control::View`), and each attribute channel's look (its switch and transfer function:
//! colour map, opacity, medium, extinction, emission, shadows, albedo), a message per
//! channel that changed since the last it was sent (`Control::Look`).

mod coordinator;
mod messages;
mod serve;

use std::time::Duration;

use super::config::PlayError;
use crate::cluster::Silent;

pub use coordinator::RankWorkers;
pub use serve::serve;

/// Finished frames a rank may render ahead of rank 0 letting them go, their images
/// waiting on rank 0 (8 MB each at 1920x1080): its renders then overlap the presentation
/// of the other ranks' frames instead of waiting for each to be shown.
pub const AHEAD: usize = 3;

/// How often a rank reports (and rank 0 sends a heartbeat) when nothing else happens.
pub const REPORT_EVERY: Duration = Duration::from_millis(200);

/// Why a rank's part of a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RanksPlayError {
    /// This rank's player failed, or a message did not parse.
    #[error(transparent)]
    Play(#[from] PlayError),
    /// Ranks stopped answering: the caller should end the run ([`Ranks::abort`]).
    #[error("{0}: a rank died or stopped answering")]
    Silent(#[from] Silent),
}
