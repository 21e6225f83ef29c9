//! `play --headless --frames-out DIR`, in one process or across MPI ranks (alternate
//! frames, `supercell::app::ranks`): every presented frame written in order as
//! `frame_NNNNN.png`, then a row per rank.

use std::path::Path;

use anyhow::{Context, Result, bail};

use supercell::app::ranks::{Presented, RanksPlay, RanksPlayError, play_ranks};
use supercell::app::software::{self, Requested};
use supercell::app::{PlayError, Player, PlayerGpu};
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
    super::play::refuse_window_flags(args)?;
    // Refused before a dataset is made or a device opened.
    if args.gpus.is_some() || args.soak.is_some() || args.screenshot.is_some() {
        bail!("--frames-out cannot be used with --gpus, --soak or --screenshot");
    }
    let req = super::play::requested(args)?;
    let scene = super::play::choose_scene(args.scene.as_deref())?;
    across(args, &req, &scene, launched)
}

/// Runs `play` across `launched` ranks (or alone); rank 0 writes the frames and reports.
fn across(
    args: &PlayArgs,
    req: &Requested,
    scene: &ChosenScene,
    launched: Option<Box<dyn Ranks>>,
) -> Result<()> {
    let ranks: Box<dyn Ranks> = launched.unwrap_or_else(|| Box::new(Solo));
    let Some(out) = args.frames_out.as_deref() else {
        bail!(
            "play across MPI ranks needs --headless --frames-out DIR (the window across ranks is not built yet)"
        );
    };
    if ranks.rank() == 0 {
        std::fs::create_dir_all(out).with_context(|| format!("cannot make {}", out.display()))?;
    }
    let timeout = duration_flag("--timeout", &args.timeout)?;
    let frames = u32::try_from(args.frames).unwrap_or(u32::MAX);
    let gpu = PlayerGpu::open_best()?;
    let settings = software::choose(&gpu.caps, req);
    let cfg = player_config(args, settings.size, &PlaybackDefaults::default())?;
    let mut player = Player::open_scene(&gpu, &scene.scene, &cfg)?;
    settings.apply_view(player.view_mut());
    let mut write = |p: Presented<'_>| write_frame(out, p);
    let outcome = play_ranks(
        &*ranks,
        &mut player,
        &gpu.describe(),
        frames,
        timeout,
        &mut write,
    );
    let report = match outcome {
        Ok(Some(r)) => r,
        Ok(None) => return Ok(()),
        Err(RanksPlayError::Silent(silent)) if ranks.size() > 1 => super::end_run(&*ranks, &silent),
        Err(e) => return Err(e.into()),
    };
    print!("{}", text(&report, out));
    if let Some(j) = &args.json {
        let body = serde_json::to_vec_pretty(&report)?;
        std::fs::write(j, body).with_context(|| format!("cannot write {}", j.display()))?;
    }
    Ok(())
}

/// Writes one presented frame as `DIR/frame_NNNNN.png`.
fn write_frame(dir: &Path, p: Presented<'_>) -> Result<(), PlayError> {
    let image = supercell::render::Image {
        width: p.width,
        height: p.height,
        rgba8: p.rgba8.to_vec(),
        linear: Vec::new(),
    };
    let path = dir.join(format!("frame_{:05}.png", p.frame));
    image
        .write_png(&path)
        .map_err(|e| PlayError::Usage(format!("cannot write {}: {e}", path.display())))
}

/// The report: what was presented, then a row per rank.
fn text(r: &RanksPlay, out: &Path) -> String {
    let mut s = format!(
        "play across {} rank(s), alternate frames: {} frames presented in order to {} in {:.3} s = {:.2} frames/s\n",
        r.ranks,
        r.presented.len(),
        out.display(),
        r.wall_s,
        r.frames_per_s
    );
    s += &format!(
        "{:>4}  {:<16} {:>6} {:>9} {:>10} {:>12}  adapter\n",
        "rank", "host", "frames", "frames/s", "render ms", "transfer ms"
    );
    for p in &r.per_rank {
        s += &format!(
            "{:>4}  {:<16} {:>6} {:>9.2} {:>10.1} {:>12.2}  {}\n",
            p.rank, p.host, p.frames, p.frames_per_s, p.render_ms, p.transfer_ms, p.adapter
        );
    }
    s
}
