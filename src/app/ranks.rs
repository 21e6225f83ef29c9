//! `play` across ranks, alternate frames: rank k of N reads and renders frames k, k+N, ...
//! with its own engine, player and renderer, and sends each finished image to rank 0,
//! which presents the images strictly in frame order, each once. One process (N = 1) runs
//! through the same code with [`crate::cluster::Solo`].
//!
//! Each rank shows its frames by a jump (the player paused), so a rank reads only the
//! frames it owns. Rank 0 renders its own frames when their turn comes and otherwise waits
//! for the next frame's image; a rank that dies or stops answering is named once the
//! others have waited `timeout` for it ([`crate::cluster::Silent`]).
//!
//! Images go as point-to-point messages with a blocking send (8 MB at 1080p): MPI may hold
//! a large image until rank 0 takes it, or buffer a small one, so how far a rank runs ahead
//! of the presentation is up to MPI's buffering (not measured).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::config::PlayError;
use super::core::Player;
use crate::cluster::{Ranks, Silent, barrier_within, gather_within, share};

/// Tag of the image messages.
const IMAGE: i32 = 0x5c10;

/// One rank's part, as rank 0 reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankPlay {
    /// The rank.
    pub rank: usize,
    /// Its host.
    pub host: String,
    /// The adapter it rendered on.
    pub adapter: String,
    /// Frames it read and rendered.
    pub frames: u32,
    /// Seconds from the common start to its last image's hand-over.
    pub wall_s: f64,
    /// Its frames over `wall_s`.
    pub frames_per_s: f64,
    /// Mean milliseconds from a frame's jump to its image being read back.
    pub render_ms: f64,
    /// Mean milliseconds handing an image to rank 0 (0 on rank 0).
    pub transfer_ms: f64,
}

/// What rank 0 presents and reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RanksPlay {
    /// Ranks.
    pub ranks: usize,
    /// The frames in the order they were presented.
    pub presented: Vec<u32>,
    /// Seconds from the common start to the last presentation.
    pub wall_s: f64,
    /// Presented frames over `wall_s`.
    pub frames_per_s: f64,
    /// Every rank, in rank order.
    pub per_rank: Vec<RankPlay>,
}

/// One frame's image as rank 0 presents it.
#[derive(Clone, Copy, Debug)]
pub struct Presented<'a> {
    /// The frame.
    pub frame: u32,
    /// Width, pixels.
    pub width: u32,
    /// Height, pixels.
    pub height: u32,
    /// Its pixels, rgba8, sRGB-encoded, row after row.
    pub rgba8: &'a [u8],
}

/// What rank 0 does with each image, in frame order.
pub type Present<'p> = dyn FnMut(Presented<'_>) -> Result<(), PlayError> + 'p;

/// Why a run across ranks failed.
#[derive(Debug, thiserror::Error)]
pub enum RanksPlayError {
    /// This rank's player failed (or, on rank 0, a report did not parse).
    #[error(transparent)]
    Play(#[from] PlayError),
    /// Ranks stopped answering: the caller should end the run ([`Ranks::abort`]).
    #[error("{0}: a rank died or stopped answering")]
    Silent(#[from] Silent),
}

/// A rendered image as it travels: frame, width, height, then rgba8 bytes.
fn encode(frame: u32, image: &crate::render::Image) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + image.rgba8.len());
    for v in [frame, image.width, image.height] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&image.rgba8);
    out
}

/// [`encode`]'s image back: (frame, width, height, rgba8).
fn decode(bytes: &[u8]) -> Option<(u32, u32, u32, &[u8])> {
    let word = |i: usize| {
        Some(u32::from_le_bytes(
            bytes.get(4 * i..4 * i + 4)?.try_into().ok()?,
        ))
    };
    let (frame, w, h) = (word(0)?, word(1)?, word(2)?);
    let pixels = bytes.get(12..)?;
    (pixels.len() as u64 == u64::from(w) * u64::from(h) * 4).then_some((frame, w, h, pixels))
}

/// Shows `frame` (a jump, paused) and reads its image back.
fn render_frame(
    player: &mut Player,
    frame: u32,
    timeout: Duration,
) -> Result<crate::render::Image, PlayError> {
    let deadline = Instant::now() + timeout;
    player.set_playing(false);
    player.scrub(frame);
    loop {
        if player.damaged_frames().contains_key(&frame) || player.jumped_to_damaged(frame) {
            return Err(PlayError::Usage(format!("frame {frame} could not be read")));
        }
        let t = player.tick()?;
        if !player.scrub_pending() && player.shown_frame() == Some(frame) {
            break;
        }
        if Instant::now() > deadline {
            return Err(PlayError::Usage(format!(
                "frame {frame} was not shown within {:.0} s",
                timeout.as_secs_f64()
            )));
        }
        if t.shown.is_none() {
            player.wait(Duration::from_millis(1));
        }
    }
    player.read_image()
}

/// This rank's running totals.
struct Tally {
    frames: u32,
    render: Duration,
    transfer: Duration,
    start: Instant,
}

impl Tally {
    fn report(&self, ranks: &dyn Ranks, adapter: &str) -> RankPlay {
        let wall_s = self.start.elapsed().as_secs_f64();
        let mean = |d: Duration| {
            if self.frames == 0 {
                0.0
            } else {
                d.as_secs_f64() * 1e3 / f64::from(self.frames)
            }
        };
        RankPlay {
            rank: ranks.rank(),
            host: ranks.host(),
            adapter: adapter.to_string(),
            frames: self.frames,
            wall_s,
            frames_per_s: if wall_s > 0.0 {
                f64::from(self.frames) / wall_s
            } else {
                0.0
            },
            render_ms: mean(self.render),
            transfer_ms: mean(self.transfer),
        }
    }
}

/// Plays frames `0..frames` (at most the dataset's) across `ranks`, alternate frames, each
/// rank with its own `player`; rank 0 calls `present` with every frame's image strictly in
/// order and returns the report; the other ranks return
/// `None`. `timeout` bounds each frame's render and every wait for another rank.
pub fn play_ranks(
    ranks: &dyn Ranks,
    player: &mut Player,
    adapter: &str,
    frames: u32,
    timeout: Duration,
    present: &mut Present<'_>,
) -> Result<Option<RanksPlay>, RanksPlayError> {
    let n = frames.min(player.frame_count());
    let size = ranks.size();
    barrier_within(ranks, Some(timeout))?;
    let mut tally = Tally {
        frames: 0,
        render: Duration::ZERO,
        transfer: Duration::ZERO,
        start: Instant::now(),
    };
    if ranks.rank() != 0 {
        for f in share(n as usize, ranks.rank(), size) {
            let t = Instant::now();
            let image = render_frame(player, f as u32, timeout)?;
            tally.render += t.elapsed();
            let t = Instant::now();
            ranks.send(0, IMAGE, &encode(f as u32, &image));
            tally.transfer += t.elapsed();
            tally.frames += 1;
        }
        let mine = serde_json::to_vec(&tally.report(ranks, adapter)).expect("a report is JSON");
        gather_within(ranks, &mine, Some(timeout))?;
        return Ok(None);
    }
    let presented = present_in_order(ranks, player, n, timeout, &mut tally, present)?;
    let wall_s = tally.start.elapsed().as_secs_f64();
    let mine = serde_json::to_vec(&tally.report(ranks, adapter)).expect("a report is JSON");
    let all = gather_within(ranks, &mine, Some(timeout))?.unwrap_or_default();
    let per_rank = all
        .iter()
        .map(|b| serde_json::from_slice::<RankPlay>(b))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PlayError::Usage(format!("a rank's report did not parse: {e}")))?;
    Ok(Some(RanksPlay {
        ranks: size,
        frames_per_s: if wall_s > 0.0 {
            presented.len() as f64 / wall_s
        } else {
            0.0
        },
        presented,
        wall_s,
        per_rank,
    }))
}

/// Rank 0: renders its own frames when their turn comes, takes the others' images as they
/// arrive, and presents frame after frame in order.
fn present_in_order(
    ranks: &dyn Ranks,
    player: &mut Player,
    n: u32,
    timeout: Duration,
    tally: &mut Tally,
    present: &mut Present<'_>,
) -> Result<Vec<u32>, RanksPlayError> {
    let size = ranks.size() as u32;
    let mut arrived: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    let mut presented = Vec::with_capacity(n as usize);
    for next in 0..n {
        if next % size == 0 {
            let t = Instant::now();
            let image = render_frame(player, next, timeout)?;
            tally.render += t.elapsed();
            tally.frames += 1;
            present(Presented {
                frame: next,
                width: image.width,
                height: image.height,
                rgba8: &image.rgba8,
            })?;
            presented.push(next);
            continue;
        }
        while !arrived.contains_key(&next) {
            let Some((from, bytes)) = ranks.receive_until(IMAGE, Some(Instant::now() + timeout))
            else {
                return Err(Silent {
                    ranks: vec![(next % size) as usize],
                    waited: timeout,
                }
                .into());
            };
            match decode(&bytes) {
                Some((f, ..)) if f < n && f % size == from as u32 => {
                    arrived.insert(f, bytes);
                }
                _ => {
                    return Err(PlayError::Usage(format!(
                        "rank {from} sent an image that is not one of its frames"
                    ))
                    .into());
                }
            }
        }
        let bytes = arrived.remove(&next).expect("arrived above");
        let (frame, width, height, rgba8) = decode(&bytes).expect("checked on arrival");
        present(Presented {
            frame,
            width,
            height,
            rgba8,
        })?;
        presented.push(frame);
    }
    Ok(presented)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_travel_whole_and_short_ones_are_refused() {
        let mut image = crate::render::Image::new(3, 2);
        image
            .rgba8
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = i as u8);
        let bytes = encode(7, &image);
        let (f, w, h, px) = decode(&bytes).unwrap();
        assert_eq!((f, w, h), (7, 3, 2));
        assert_eq!(px, &image.rgba8[..]);
        assert!(decode(&bytes[..bytes.len() - 1]).is_none());
        assert!(decode(&bytes[..8]).is_none());
    }
}
