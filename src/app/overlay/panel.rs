//! The figures panel as data: its text lines and the table of both paths, for one GPU and
//! for several GPUs or ranks alike, made by one function ([`figures_panel`]) from one
//! structure (the timeline and its rows, [`GpusOverlay`]; a player without a coordinator
//! gets one of its own, [`GpusOverlay::lone`]). Drawing and `dump-state` both show what it
//! returns, so the picture and the tests read the same words.
//!
//! One GPU reads as it always has: the active path's rates, warm-up, latency, CPU and GPU
//! memory, the frame line, the render line, the faults, and both paths' full figures side
//! by side. Several GPUs add a row per GPU (read rate, frames/s, copy time, faults, memory)
//! and the total, and the table gets both paths' figures of every GPU.

use serde::Serialize;

use super::{
    GpusOverlay, UiState, compact_lines, fault_lines, figure_table, gpu_lines, stats_lines,
};
use crate::app::core::{PathSel, Player};
use crate::app::figures::{TimelineFacts, bytes_h, frame_line, render_line};

/// What the figures panel shows.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FiguresPanel {
    /// The text lines, the first one the title.
    pub lines: Vec<String>,
    /// Both paths' figures side by side (see [`figure_table`]): one GPU's rows, or with
    /// several GPUs each GPU's rows under its name. Drawn with the full figures only.
    pub table: Vec<[String; 5]>,
}

impl GpusOverlay {
    /// The timeline of a player without a coordinator above it (the headless screenshot,
    /// tests of the overlay): its own, and no rows.
    pub fn lone(player: &Player) -> GpusOverlay {
        let t = TimelineFacts::of_player(player);
        GpusOverlay {
            shown_frame: t.shown,
            position: player.position(),
            frame_count: t.frame_count,
            playing: t.playing,
            speed_fps: t.speed,
            direction: t.direction,
            mode: t.mode,
            last_scrub_ms: player.last_scrub_ms(),
            damaged: player.damaged_frames().keys().copied().collect(),
            last_error: player.last_error().map(str::to_string),
            frame_times: (0..t.frame_count).map(|f| player.frame_time(f)).collect(),
            ..GpusOverlay::default()
        }
    }

    /// Where the timeline stands, for the frame lines.
    pub fn timeline(&self) -> TimelineFacts {
        TimelineFacts {
            shown: self.shown_frame,
            frame_count: self.frame_count,
            time: self
                .shown_frame
                .and_then(|f| self.frame_times.get(f as usize).copied())
                .unwrap_or(0.0),
            playing: self.playing,
            direction: self.direction,
            mode: self.mode,
            speed: self.speed_fps,
        }
    }

    /// Whether several GPUs (or ranks) play the timeline.
    pub fn several(&self) -> bool {
        self.rows.len() > 1
    }
}

/// The figures panel of the window (or of a player alone, where `ui` has no timeline):
/// `lead` is the one GPU's player, or GPU 0's.
pub fn figures_panel(lead: &Player, ui: &UiState) -> FiguresPanel {
    let lone;
    let o = match &ui.gpus {
        Some(o) => o,
        None => {
            lone = GpusOverlay::lone(lead);
            &lone
        }
    };
    let timeline = o.timeline();
    let direct_ok = lead.direct_unavailable().is_none();
    if !o.several() {
        let lines = if ui.compact {
            compact_lines(lead, &timeline)
        } else {
            stats_lines(lead, &timeline, ui.cpu_percent, ui.gpu_memory.as_ref())
        };
        let table = figure_table(
            &lead.figures(PathSel::Direct),
            &lead.figures(PathSel::Host),
            direct_ok,
        );
        return FiguresPanel { lines, table };
    }
    let active = lead.active_path();
    let lines = if ui.compact {
        let mut v = gpu_lines(o, active, true);
        v.extend(several_fault_line(o));
        v
    } else {
        several_lines(lead, o, ui, &timeline)
    };
    FiguresPanel {
        lines,
        table: several_table(o, direct_ok),
    }
}

/// The full lines of several GPUs: the title, a row per GPU, the total, CPU and every
/// local GPU's memory, why a path cannot run, the frame line, the render line (GPU 0's
/// view is every GPU's) and the faults.
fn several_lines(
    lead: &Player,
    o: &GpusOverlay,
    ui: &UiState,
    timeline: &TimelineFacts,
) -> Vec<String> {
    let active = lead.active_path();
    // `gpu_lines` gives the title, the rows, the total and a short frame line (replaced
    // here by the full one).
    let mut v = gpu_lines(o, active, false);
    v.pop();
    for (line, r) in v.iter_mut().skip(1).zip(&o.rows) {
        if r.faults > 0 {
            line.push_str(&format!(", {} faults", r.faults));
        }
    }
    // Each GPU's memory where the window could read it (its device is in this process).
    let memory: Vec<String> = o
        .rows
        .iter()
        .map(|r| {
            let who = if r.rank.is_some() { "rank" } else { "GPU" };
            let used = ui.gpus_memory.get(r.gpu).copied().flatten();
            let used = used.map_or_else(|| "n/a".to_string(), |b| bytes_h(b as f64));
            format!("{who} {} {used}", r.gpu)
        })
        .collect();
    v.push(format!(
        "CPU {:.0}%   GPU memory: {}",
        ui.cpu_percent,
        memory.join(", ")
    ));
    let rep = lead.path_report(active);
    if let Some(fb) = &rep.fallback {
        v.push(format!("fallback (GPU 0): {fb}"));
    }
    if let Some(why) = lead.direct_unavailable() {
        v.push(format!("direct path unavailable: {why}"));
    }
    v.push(frame_line(timeline));
    v.push(render_line(lead));
    v.extend(several_fault_line(o));
    // GPU 0's own fault lines (its latest fault in words, slots held), under its name.
    v.extend(fault_lines(lead).into_iter().map(|l| format!("GPU 0: {l}")));
    v
}

/// With several GPUs, the faults of all together (each GPU's are on its row) and the
/// frames damaged on the timeline; nothing while all is well.
fn several_fault_line(o: &GpusOverlay) -> Option<String> {
    let faults: u64 = o.rows.iter().map(|r| r.faults).sum();
    (faults > 0 || !o.damaged.is_empty())
        .then(|| format!("faults: {faults}   damaged frames: {}", o.damaged.len()))
}

/// With several GPUs, both paths' figures of each GPU: [`figure_table`]'s header, then
/// each GPU's three rows with its name in front (`GPU1 GB/s`, `rank 1 GB/s`).
fn several_table(o: &GpusOverlay, direct_ok: bool) -> Vec<[String; 5]> {
    let mut t = Vec::new();
    for r in &o.rows {
        let mut rows = figure_table(&r.paths[0], &r.paths[1], direct_ok).into_iter();
        let header = rows.next();
        if t.is_empty() {
            t.extend(header);
        }
        let who = match r.rank {
            Some(k) => format!("rank {k}"),
            None => format!("GPU{}", r.gpu),
        };
        t.extend(rows.map(|mut row| {
            row[0] = format!("{who} {}", row[0]);
            row
        }));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::overlay::GpuRow;
    use crate::app::stats::PathFigures;

    fn figures(frames_per_s: f64) -> PathFigures {
        PathFigures {
            rendered_fps: frames_per_s,
            ..PathFigures::default()
        }
    }

    fn row(gpu: usize, faults: u64) -> GpuRow {
        GpuRow {
            gpu,
            ordinal: gpu,
            rank: None,
            host: None,
            adapter: "llvmpipe".into(),
            path_label: "staged".into(),
            gbps: 1.0,
            frames_per_s: 2.0,
            copy_ms: None,
            frames_shown: 1,
            path_frames: 1,
            faults,
            paths: [figures(0.0), figures(3.0 + gpu as f64)],
        }
    }

    #[test]
    fn several_gpus_table_has_every_gpus_rows_under_one_header() {
        let o = GpusOverlay {
            rows: vec![row(0, 0), row(1, 2)],
            ..GpusOverlay::default()
        };
        let t = several_table(&o, false);
        assert_eq!(t.len(), 1 + 2 * 3, "{t:?}");
        assert_eq!(t[0][1], "direct avg");
        assert_eq!(t[1][0], "GPU0 frames/s rendered");
        assert_eq!(t[4][0], "GPU1 frames/s rendered");
        assert_eq!(t[4][3], "4.00");
        assert_eq!(t[4][1], "n/a");
        assert_eq!(
            several_fault_line(&o).as_deref(),
            Some("faults: 2   damaged frames: 0")
        );
        assert!(several_fault_line(&GpusOverlay::default()).is_none());
    }
}
