//! `play --headless` across MPI ranks (or alone with `--frames-out DIR`): the one
//! coordinator over ranks (`supercell::app::ranks::RankWorkers`), alternate frames, every
//! path played in order, then exact jumps, as `play --gpus` does; rank 0 reports a row per
//! rank and, with `--frames-out`, writes each presented frame as `frame_NNNNN.png`.
//!
//! `play` in the window across ranks: rank 0 opens the window on its GPU and plays the same
//! coordinator there (`supercell::app::window::PlayOn::Ranks`); the other ranks serve their
//! players and need no display.

use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use supercell::app::PlayError;
use supercell::app::PlayerGpu;
use supercell::app::gpus::{self, GpuName, MultiPlayer};
use supercell::app::headless::HeadlessOptions;
use supercell::app::ranks::{RankWorkers, RanksPlayError, serve};
use supercell::app::soak;
use supercell::app::software::{self, Requested};
use supercell::app::window;
use supercell::cluster::{Ranks, Solo};
use supercell::scene::PlaybackDefaults;

use super::play::{ChosenScene, PlayArgs, duration_flag, player_config};

/// Runs `supercell play`: across ranks (alternate frames, or alone with `--frames-out`)
/// where asked for or where an MPI launcher started this process, else the one-process
/// player ([`super::play::run`]).
pub fn run(args: &PlayArgs) -> Result<()> {
    let launched = super::bench::launched_ranks()?;
    if args.frames_out.is_none() && launched.is_none() {
        return super::play::run(args);
    }
    let launched = match launched {
        Some(ranks) if !args.headless => {
            let req = super::play::requested(args)?;
            let scene = super::play::choose_scene(args.scene.as_deref())?;
            return window_across(args, req, scene, ranks);
        }
        l => l,
    };
    super::play::refuse_window_flags(args)?;
    // Refused before a dataset is made or a device opened. A long run across ranks
    // (`--soak`) presents no frames to write.
    let soak_frames = args.soak.is_some() && args.frames_out.is_some();
    if soak_frames || args.screenshot.is_some() {
        bail!("--frames-out cannot be used with --soak or --screenshot");
    }
    let req = super::play::requested(args)?;
    let scene = super::play::choose_scene(args.scene.as_deref())?;
    across(args, &req, &scene, launched)
}

/// Runs `play` across `launched` ranks (or alone); rank 0 coordinates, writes the frames
/// and reports, the others serve it.
fn across(
    args: &PlayArgs,
    req: &Requested,
    scene: &ChosenScene,
    launched: Option<Box<dyn Ranks>>,
) -> Result<()> {
    let ranks: Rc<dyn Ranks> = match launched {
        Some(r) => Rc::from(r),
        None => Rc::new(Solo),
    };
    if args.frames == 0 {
        bail!("--frames must be at least 1");
    }
    let out = args.frames_out.as_deref();
    if let Some(out) = out
        && ranks.rank() == 0
    {
        std::fs::create_dir_all(out).with_context(|| format!("cannot make {}", out.display()))?;
    }
    let timeout = duration_flag("--timeout", &args.timeout)?;
    let opened = open_rank_gpus(args, &*ranks)?;
    let settings = software::choose(&opened[0].0.caps, req);
    let cfg = player_config(args, settings.size, &PlaybackDefaults::default())?;
    let (mut locals, frame_count) = gpus::open_rank_parts(opened, &*ranks, &scene.scene, &cfg)?;
    for g in &mut locals {
        settings.apply_view(g.player_mut().view_mut());
    }
    if ranks.rank() != 0 {
        return match serve(&*ranks, &mut locals, timeout) {
            Ok(()) => Ok(()),
            Err(RanksPlayError::Silent(s)) => super::end_run(&*ranks, &s),
            Err(e) => Err(e.into()),
        };
    }
    let workers = match RankWorkers::connect(ranks.clone(), locals, timeout) {
        Ok(w) => w,
        Err(RanksPlayError::Silent(s)) => super::end_run(&*ranks, &s),
        Err(e) => return Err(end_with(&*ranks, e.into())),
    };
    let mut mp = MultiPlayer::over(Box::new(workers), frame_count, &cfg)?;
    if let Some(d) = &args.soak {
        return soak_across(args, d, scene, settings, mp, &*ranks);
    }
    mp.set_capture(out.is_some());
    let bar = super::play::progress_bar("{prefix} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}");
    let runs = gpus::run_paths(
        &mut mp,
        &HeadlessOptions {
            frames: args.frames,
            paths: super::play::paths_of(args.path),
            scrub_jumps: args.scrub_jumps,
            timeout,
        },
        &mut |p| super::play::show_progress(&bar, &p, "frames presented"),
    );
    bar.finish_and_clear();
    if let Some(s) = mp.workers().silent().cloned() {
        super::end_run(&*ranks, &s);
    }
    mp.workers_mut().finish();
    mp.drain(Duration::from_secs(10));
    if let Some(out) = out {
        for (frame, _, rgba8) in mp.captured() {
            write_frame(out, *frame, mp.player(0).size(), rgba8)?;
        }
    }
    let report = super::play::headless_report(args, scene, settings, &mp, runs);
    super::play::end_headless_run(args, &report)
}

/// The GPUs this rank plays: those `--gpus` names on its host, else its local rank's.
fn open_rank_gpus(args: &PlayArgs, ranks: &dyn Ranks) -> Result<Vec<(PlayerGpu, GpuName)>> {
    let ordinals = args
        .gpus
        .as_ref()
        .map(super::play::resolve_gpus)
        .transpose()?;
    Ok(gpus::open_rank_gpus(ranks, ordinals.as_deref())?)
}

/// Rank 0 failed before the run began: the other ranks would wait for it for twice the
/// timeout, so the run ends now with `e` said.
fn end_with(ranks: &dyn Ranks, e: anyhow::Error) -> anyhow::Error {
    if ranks.size() > 1 {
        eprintln!(
            "supercell: error: rank 0 on {}: {e:#}; ending the run",
            ranks.host()
        );
        ranks.abort(1)
    }
    e
}

/// The window across `launched` ranks: rank 0 opens the window and plays the coordinator
/// over every rank there; the others serve their players (no window, no display needed).
/// Ends every rank: told to stop when the window closes, aborted where a rank stopped
/// answering or rank 0 failed.
fn window_across(
    args: &PlayArgs,
    req: Requested,
    scene: ChosenScene,
    launched: Box<dyn Ranks>,
) -> Result<()> {
    let ranks: Rc<dyn Ranks> = Rc::from(launched);
    let timeout = duration_flag("--timeout", &args.timeout)?;
    if ranks.rank() != 0 {
        let cfg = super::play::window_player_config(args, &req, &scene.scene)?;
        let opened = open_rank_gpus(args, &*ranks)?;
        let settings = software::choose(&opened[0].0.caps, &req);
        let (mut locals, _) = gpus::open_rank_parts(opened, &*ranks, &scene.scene, &cfg)?;
        for g in &mut locals {
            settings.apply_view(g.player_mut().view_mut());
        }
        return match serve(&*ranks, &mut locals, timeout) {
            Ok(()) => Ok(()),
            Err(RanksPlayError::Silent(s)) => super::end_run(&*ranks, &s),
            Err(e) => Err(e.into()),
        };
    }
    let gpus = args
        .gpus
        .as_ref()
        .map(super::play::resolve_gpus)
        .transpose()?;
    let play_on = window::PlayOn::Ranks(window::RanksPlay {
        ranks: ranks.clone(),
        timeout,
        gpus,
    });
    let failed = match super::play::window_options(args, req, scene, play_on) {
        Ok(opts) => match window::run(opts) {
            Ok(()) => return Ok(()),
            Err(window::WindowError::Silent(s)) => super::end_run(&*ranks, &s),
            Err(e) => anyhow::Error::from(e),
        },
        Err(e) => e,
    };
    if ranks.size() > 1 {
        // The other ranks would wait for rank 0 for twice the timeout: the run ends now.
        eprintln!(
            "supercell: error: rank 0 on {}: {failed:#}; ending the run",
            ranks.host()
        );
        ranks.abort(1)
    }
    Err(failed)
}

/// `play --headless --soak D` across ranks, on rank 0: the long run over every rank
/// (`supercell::app::soak::run`), the ranks stopped, its report (a series and a
/// verdict per rank) printed and written.
fn soak_across(
    args: &PlayArgs,
    d: &str,
    scene: &ChosenScene,
    settings: software::Interactive,
    mut mp: MultiPlayer,
    ranks: &dyn Ranks,
) -> Result<()> {
    let run = super::play::soak_run(args, d, |opts, progress| soak::run(&mut mp, opts, progress));
    if let Some(s) = mp.workers().silent().cloned() {
        super::end_run(ranks, &s);
    }
    mp.workers_mut().finish();
    mp.drain(Duration::from_secs(10));
    let soak = run?;
    let mut report = super::play::headless_report(args, scene, settings, &mp, Vec::new());
    report.frames_per_path = 0;
    report.soak = Some(soak);
    super::play::end_headless_run(args, &report)?;
    super::play::soak_verdict(report.soak.as_ref())
}

/// Writes one presented frame as `DIR/frame_NNNNN.png`.
fn write_frame(dir: &Path, frame: u32, (width, height): (u32, u32), rgba8: &[u8]) -> Result<()> {
    let image = supercell::render::Image {
        width,
        height,
        rgba8: rgba8.to_vec(),
        linear: Vec::new(),
    };
    let path = dir.join(format!("frame_{frame:05}.png"));
    image
        .write_png(&path)
        .map_err(|e| PlayError::Usage(format!("cannot write {}: {e}", path.display())))?;
    Ok(())
}
