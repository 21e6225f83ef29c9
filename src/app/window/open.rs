//! Where the window's players run ([`PlayOn`], decided by the binary) and opening them on
//! the devices the window opened, always behind the one coordinator ([`MultiPlayer`]): the
//! one GPU's player, several GPUs' players of this process, or, across MPI ranks, this
//! rank's player and the other ranks' (which serve theirs: [`crate::app::ranks::serve`]).

use std::rc::Rc;
use std::time::Duration;

use super::WindowError;
use super::devices::Opened;
use crate::app::PlayerGpu;
use crate::app::core::PlayerConfig;
use crate::app::gpus::{self, MultiPlayer, Workers};
use crate::app::ranks::{RankWorkers, RanksPlayError};
use crate::app::software::Interactive;
use crate::cluster::Ranks;

/// Where the window's players run.
#[derive(Clone, Debug, Default)]
pub enum PlayOn {
    /// One GPU, one player.
    #[default]
    One,
    /// Several GPUs of this process (`--gpus`, ordinals; GPU 0 presents): one player per
    /// GPU over the frames it owns ([`MultiPlayer`]).
    Gpus(Vec<usize>),
    /// Across MPI ranks: this process is rank 0 and presents; every rank plays its local
    /// rank's GPU on its host, or the GPUs [`RanksPlay::gpus`] names there (worker `j` is
    /// rank `j / G`'s GPU `j % G`).
    Ranks(RanksPlay),
}

/// The ranks of a window across ranks.
#[derive(Clone)]
pub struct RanksPlay {
    /// The run's ranks; this process is rank 0, the others serve their players.
    pub ranks: Rc<dyn Ranks>,
    /// How long a rank may send nothing before it is named and the run ends (its hello
    /// included).
    pub timeout: Duration,
    /// The ordinals `--gpus` names within each rank (`None`: its local rank's GPU).
    pub gpus: Option<Vec<usize>>,
}

impl std::fmt::Debug for RanksPlay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RanksPlay")
            .field("size", &self.ranks.size())
            .field("timeout", &self.timeout)
            .field("gpus", &self.gpus)
            .finish()
    }
}

/// What the window plays (the coordinator over one GPU or several; each device stays with
/// its player), and what to say on screen at once.
pub(super) struct Opening {
    pub play: MultiPlayer,
    pub notes: Vec<String>,
}

/// Opens the players of `opened` on `scene` with `cfg` (the window's render size), each
/// view set as the adapter's `settings` say.
pub(super) fn open_play(
    opened: Opened,
    on: &PlayOn,
    scene: &crate::scene::Scene,
    cfg: &PlayerConfig,
    settings: &Interactive,
) -> Result<Opening, WindowError> {
    match opened {
        Opened::One(g) => {
            // One GPU through the same coordinator as several (N = 1).
            let mut mp = MultiPlayer::open_one(*g, scene, cfg)?;
            let player = mp.player_mut(0);
            log::info!("play: {}", player.slot_plan().line());
            for note in player.scene_notes() {
                log::info!("play: {note}");
            }
            settings.apply_view(player.view_mut());
            // Said on screen too: an empty first frame looks like a broken player.
            let notes = player.scene_notes().to_vec();
            Ok(Opening { play: mp, notes })
        }
        Opened::Gpus(opened) => {
            let mut mp = MultiPlayer::open_scene(opened, scene, cfg)?;
            for k in 0..mp.gpu_count() {
                settings.apply_view(mp.player_mut(k).view_mut());
                log::info!("play: GPU {k}: {}", mp.player(k).slot_plan().line());
            }
            Ok(Opening {
                play: mp,
                notes: Vec::new(),
            })
        }
        Opened::Rank(opened) => {
            let PlayOn::Ranks(r) = on else {
                unreachable!("a rank's GPU is opened for a run across ranks")
            };
            let mp = open_ranks(opened, r, scene, cfg, settings)?;
            Ok(Opening {
                play: mp,
                notes: Vec::new(),
            })
        }
    }
}

/// Rank 0's part of a window across ranks: its players (its GPUs `opened`, the first
/// presenting; each over the frames it owns), every other rank's once its hello arrived (within the timeout, else the silent ranks are
/// named), told rank 0's view before any frame, and the coordinator over them all.
fn open_ranks(
    opened: Vec<(PlayerGpu, gpus::GpuName)>,
    r: &RanksPlay,
    scene: &crate::scene::Scene,
    cfg: &PlayerConfig,
    settings: &Interactive,
) -> Result<MultiPlayer, WindowError> {
    let (mut locals, frame_count) = gpus::open_rank_parts(opened, &*r.ranks, scene, cfg)?;
    for (slot, g) in locals.iter_mut().enumerate() {
        settings.apply_view(g.player_mut().view_mut());
        log::info!(
            "play: rank 0, GPU {slot}: {}",
            g.player().slot_plan().line()
        );
    }
    let mut workers = match RankWorkers::connect(r.ranks.clone(), locals, r.timeout) {
        Ok(w) => w,
        Err(RanksPlayError::Silent(s)) => return Err(WindowError::Silent(s)),
        Err(RanksPlayError::Play(e)) => return Err(e.into()),
    };
    // The window's view and render size reach every rank before the coordinator points
    // them at their first frames (messages of one tag arrive in order): no rank renders a
    // first frame of its own view or size.
    if let Some(lead) = workers.player(0) {
        let (view, size) = (lead.view().clone(), lead.size());
        for k in 1..workers.count() {
            workers.set_view(k, &view, size);
        }
    }
    Ok(MultiPlayer::over(Box::new(workers), frame_count, cfg)?)
}
