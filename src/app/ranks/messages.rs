//! The messages of a run across ranks (see [`super`]): rank 0's control messages, a
//! rank's hello and reports, and how they travel (a JSON header behind its length, then
//! an image's bytes).

use serde::{Deserialize, Serialize};

use crate::app::config::PathSel;
use crate::app::faults::FrameFault;
use crate::app::soak::SoakSample;
use crate::app::stats::PathFigures;
use crate::pipeline::{Direction, PlayMode};
use crate::render::{AttributeView, Camera, RenderSettings, TransferFunction};

/// Tag of rank 0's control messages.
pub(super) const CONTROL: i32 = 0x5c20;
/// Tag of the ranks' reports.
pub(super) const REPORT: i32 = 0x5c21;
/// Tag of the ranks' hello.
pub(super) const HELLO: i32 = 0x5c22;

/// Rank 0's control messages.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) enum Control {
    /// Jump to local frame `local`: a new generation.
    Point { generation: u64, local: u32 },
    /// Play or pause.
    Playing(bool),
    /// Switch the frame path.
    Path(PathSel),
    /// The view to render.
    View {
        camera: Camera,
        settings: RenderSettings,
        size: (u32, u32),
    },
    /// The look of attribute channel `index` of the view (`None`: the channel styles
    /// nothing): what the view a rank is given leaves out, sent where it changed.
    Look { index: u32, look: Option<Look> },
    /// The display took the image: render on.
    GoOn { generation: u64 },
    /// Start the figures of a path again.
    ResetStats(PathSel),
    /// Report now, answering `nonce`.
    Report { nonce: u64 },
    /// Play in this direction.
    Direction(Direction),
    /// Turn, stop or wrap at the ends of the rank's frames so.
    Mode(PlayMode),
    /// Show or hide view slot `slot`'s attribute.
    ShowAttribute { slot: usize, on: bool },
    /// Show or hide dataset attribute `attribute` (manifest order).
    ShowDatasetAttribute { attribute: usize, on: bool },
    /// Sample this process at `t_s` of a long run (`--soak`) and send it.
    Sample { t_s: f64 },
    /// Nothing new: rank 0 is alive.
    Alive,
    /// The run is over.
    Stop,
}

/// One attribute channel's look as rank 0's view has it: its switch and its transfer
/// function (range, colour map, opacity curve, medium, extinction, emission, shadows,
/// albedo).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Look {
    pub(super) enabled: bool,
    pub(super) tf: TransferFunction,
}

impl Look {
    pub(super) fn of(view: &Option<AttributeView>) -> Option<Look> {
        view.as_ref().map(|a| Look {
            enabled: a.enabled,
            tf: a.tf.clone(),
        })
    }
}

/// A rank's first message: its host and the GPUs it plays (one unless `--gpus` names
/// several within the rank), in slot order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Hello {
    pub(super) host: String,
    pub(super) local_rank: usize,
    pub(super) gpus: Vec<SlotHello>,
}

/// One GPU a rank plays (a slot of the rank), as its hello describes it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct SlotHello {
    pub(super) adapter: String,
    /// The GPU's ordinal on its host.
    pub(super) ordinal: usize,
    /// How its GPU was chosen.
    pub(super) matched: String,
    /// Ring slots of its player.
    pub(super) ring_slots: usize,
    pub(super) frame_times: Vec<f64>,
    pub(super) direct: Result<(), String>,
    pub(super) host_path: Result<(), String>,
}

/// A control message for one GPU of a rank: `slot` is its place among the rank's GPUs
/// (rank-wide messages, "stop", "alive" and "sample", name slot 0).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct ToSlot {
    pub(super) slot: u32,
    pub(super) control: Control,
}

/// A frame a rank has rendered; its image follows the report's header.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) struct Finished {
    pub(super) local: u32,
    pub(super) bytes: u64,
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) readback_ms: f64,
}

/// A rank's report.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct Status {
    /// The GPU of the rank it is about (its slot).
    pub(super) slot: u32,
    pub(super) generation: u64,
    pub(super) nonce: u64,
    pub(super) finished: Option<Finished>,
    pub(super) damaged: Vec<u32>,
    pub(super) direct: (PathFigures, String),
    pub(super) host: (PathFigures, String),
    pub(super) error: Option<String>,
    /// The last report: the rank obeyed "stop".
    pub(super) stopped: bool,
    /// The samples of this process rank 0 asked for since the last report (`--soak`):
    /// several where asks came faster than reports.
    pub(super) samples: Vec<SoakSample>,
    /// The last error its player saw and played on past.
    pub(super) last_error: Option<String>,
    /// Faults its player met since its last report (the latest [`FAULTS_SENT`] of them).
    pub(super) faults: Vec<FrameFault>,
    /// Faults its player met in all, and damaged frames that played later.
    pub(super) fault_count: u64,
    pub(super) recovered: u64,
}

/// Distinct errors of a rank rank 0 keeps (the first ones).
pub(super) const ERRORS_KEPT: usize = 100;

/// Faults a rank sends in one report at most (the count goes on past it), as many as a
/// player keeps.
pub(super) const FAULTS_SENT: usize = 1000;

/// `header` as JSON behind its length, then `tail`.
pub(super) fn pack<T: Serialize>(header: &T, tail: &[u8]) -> Vec<u8> {
    let json = serde_json::to_vec(header).expect("messages are JSON");
    let mut out = Vec::with_capacity(4 + json.len() + tail.len());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(tail);
    out
}

/// [`pack`]'s header and tail back.
pub(super) fn unpack<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<(T, &[u8]), String> {
    let len = bytes
        .get(..4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
        .ok_or("a message shorter than its header's length")?;
    let json = bytes
        .get(4..4 + len)
        .ok_or("a message shorter than its header")?;
    let header = serde_json::from_slice(json).map_err(|e| format!("a message's header: {e}"))?;
    Ok((header, &bytes[4 + len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_travel_whole_and_short_ones_are_refused() {
        let control = Control::Point {
            generation: 3,
            local: 7,
        };
        let bytes = pack(&control, &[1, 2, 3]);
        let (back, tail) = unpack::<Control>(&bytes).unwrap();
        assert!(matches!(
            back,
            Control::Point {
                generation: 3,
                local: 7
            }
        ));
        assert_eq!(tail, &[1, 2, 3]);
        assert!(unpack::<Control>(&bytes[..6]).is_err());
        assert!(unpack::<Control>(&bytes[..2]).is_err());
        // A view's message stays small (MPI sends it eagerly).
        let view = pack(
            &Control::View {
                camera: Camera::default(),
                settings: RenderSettings::default(),
                size: (1920, 1080),
            },
            &[],
        );
        assert!(view.len() < 4096, "{} bytes", view.len());
        // So does a look (a channel each).
        let look = pack(
            &Control::Look {
                index: 2,
                look: Some(Look {
                    enabled: true,
                    tf: TransferFunction::preset("rain", [0.0, 1.0], 1000.0),
                }),
            },
            &[],
        );
        assert!(look.len() < 4096, "{} bytes", look.len());
        let (back, _) = unpack::<Control>(&look).unwrap();
        assert!(matches!(back, Control::Look { index: 2, look: Some(l) } if l.enabled));
    }
}
