//! The overlay's view of the coordinator ([`MultiPlayer::overlay`]): the timeline and a
//! row per GPU, for one GPU and several alike.

use super::{GpuName, MultiPlayer};
use crate::app::config::PathSel;
use crate::app::stats::PathFigures;

impl MultiPlayer {
    /// The overlay's rows and timeline: each GPU's figures from the timeline (GB/s read,
    /// frames/s rendered, copies to the display GPU), its adapter and path label, the total.
    pub fn overlay(&mut self) -> crate::app::overlay::GpusOverlay {
        use crate::app::overlay::{GPUS_ORDER_KEPT, GpuReport, GpusOverlay, gpu_rows};
        let now = self.now();
        let (per, total) = self.multi.figures(now);
        let names: Vec<GpuName> = (0..self.shares.len())
            .map(|k| self.workers.name(k).clone())
            .collect();
        // Each GPU's own figures of the active path: its label, and the frames it took in
        // on it (a rank that switched paths counts up on the new one).
        let paths: Vec<(u64, String, [PathFigures; 2])> = (0..self.shares.len())
            .map(|k| {
                let (direct, direct_label) = self.workers.figures(k, PathSel::Direct);
                let (host, host_label) = self.workers.figures(k, PathSel::Host);
                match self.active {
                    PathSel::Direct => (direct.frames_delivered, direct_label, [direct, host]),
                    PathSel::Host => (host.frames_delivered, host_label, [direct, host]),
                }
            })
            .collect();
        let reports: Vec<GpuReport<'_>> = names
            .iter()
            .zip(&per)
            .zip(&paths)
            .zip(&self.shares)
            .enumerate()
            .map(|(k, (((n, f), (path_frames, label, both)), s))| GpuReport {
                ordinal: n.ordinal,
                host: n.host.as_deref(),
                rank: n.rank,
                adapter: &n.device,
                path_label: label,
                figures: *f,
                copies: s.copies_ms.len() as u64,
                path_frames: *path_frames,
                faults: self.workers.fault_mark(k).0,
                paths: both.clone(),
            })
            .collect();
        let (rows, total) = gpu_rows(&reports, &total);
        let mut damaged: Vec<u32> = self
            .shares
            .iter()
            .enumerate()
            .flat_map(|(k, s)| {
                self.workers
                    .damaged(k)
                    .into_iter()
                    .filter_map(|l| s.frames.get(l as usize).copied())
            })
            .collect();
        damaged.sort_unstable();
        let several = self.shares.len() > 1;
        let last_error = self.last_error.clone().or_else(|| {
            (0..self.shares.len()).find_map(|k| {
                let e = self.workers.player(k)?.last_error()?;
                // One GPU's error reads as it did without the coordinator.
                Some(if several {
                    format!("GPU {k}: {e}")
                } else {
                    e.to_string()
                })
            })
        });
        GpusOverlay {
            rows,
            total,
            shown_frame: self.shown,
            position: self.position(),
            frame_count: self.frame_count,
            playing: self.is_playing(),
            speed_fps: self.speed(),
            direction: self.direction(),
            mode: self.mode,
            last_scrub_ms: self.last_scrub_ms,
            damaged,
            last_error,
            presented: self.presented[self.presented.len().saturating_sub(GPUS_ORDER_KEPT)..]
                .to_vec(),
            frame_times: self.frame_times.clone(),
        }
    }
}
