//! The bare `supercell` command, the main job: the built-in storm scene (compiled into the
//! binary) on the built-in dataset (created on first run), played in a window where there is a display. Without one (a server, ssh, CI) it makes a
//! short headless run of the same player instead: it writes a picture of the last frame
//! rendered and the frames/s and GB/s it measured (text and JSON), and says how to open
//! the window.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use serde::Serialize;
use supercell::app::headless::{self, MachineReport};
use supercell::app::overlay::peak_text;
use supercell::app::window::WindowError;
use supercell::app::{PathSel, Player, PlayerConfig, PlayerGpu};
use supercell::scene::{BUILTIN_SCENE_FILE, Scene};

use super::command_line;
use super::play::PlayArgs;

/// Options of the bare command (no subcommand).
#[derive(clap::Args, Debug, Default)]
pub struct MainArgs {
    /// Make the short headless run (picture and figures) even where a window could open.
    #[arg(long)]
    pub headless: bool,
    /// Headless: where the picture and the figures go (default: `preview/` beside the
    /// built-in dataset, in the cache directory).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Version tag of the JSON the headless run writes.
/// `/2`: `gbps_peak` leaves out the ring filling at start-up (null until a window after it),
/// and `warm_up_s`, `warm_up_frames` report the filling apart.
pub const SCHEMA: &str = "supercell-main-headless/2";

/// Image size of the headless run. Small on purpose: Mesa's software Vulkan (lavapipe) on
/// two cores renders a 1280×720 storm frame in about a minute, and a first run should end
/// in seconds there, not minutes.
const HEADLESS_SIZE: (u32, u32) = (320, 180);
/// Frames the headless run shows per path at most.
const HEADLESS_FRAMES: u64 = 24;
/// After this long a path stops at the next frame even short of [`HEADLESS_FRAMES`].
const HEADLESS_BUDGET: Duration = Duration::from_secs(10);
/// A path that has shown no frame at all after this long has failed.
const FIRST_FRAME_LIMIT: Duration = Duration::from_secs(120);

/// What the headless run measured on one frame path.
#[derive(Clone, Debug, Serialize)]
pub struct PathSummary {
    /// `host` or `direct`.
    pub path: &'static str,
    /// How frames travelled (engine and mode), e.g. "cpu-only (io_uring)".
    pub label: String,
    /// Frames rendered (newly shown) while the path played.
    pub frames_rendered: u64,
    /// Frames whose bytes all arrived in GPU-visible memory.
    pub frames_delivered: u64,
    /// Frames rendered per second of play.
    pub rendered_fps: f64,
    /// Frames delivered per second of play.
    pub delivered_fps: f64,
    /// Bytes delivered per second of play, GB/s (10⁹ bytes).
    pub gbps_mean: f64,
    /// Highest **now** GB/s after the warm-up (`None` before a window after it).
    pub gbps_peak: Option<f64>,
    /// Seconds the ring took to fill at the start (`None`: it had not filled).
    pub warm_up_s: Option<f64>,
    /// Frames delivered while it filled.
    pub warm_up_frames: u64,
    /// Mean bytes per delivered frame.
    pub bytes_per_frame: f64,
    /// Seconds the path played.
    pub seconds: f64,
}

/// The JSON file the headless run writes next to its picture.
#[derive(Clone, Debug, Serialize)]
pub struct MainReport {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// UTC date and time, ISO 8601.
    pub date: String,
    /// Machine and adapter.
    pub machine: MachineReport,
    /// The scene played: `built-in scenes/storm.toml` (compiled into the binary).
    pub scene: String,
    /// The dataset played.
    pub dataset: String,
    /// The scene's attributes, in slot order.
    pub attributes: Vec<String>,
    /// Image size, pixels.
    pub size: [u32; 2],
    /// The picture (PNG of the last frame rendered).
    pub picture: String,
    /// Why there was no window.
    pub no_window: String,
    /// The command that opens the window where there is a display.
    pub window_command: String,
    /// One entry per path played: host, then direct where this machine has it.
    pub paths: Vec<PathSummary>,
}

/// The display a window would open on (`WAYLAND_DISPLAY` or `DISPLAY`), if any.
fn display() -> Option<String> {
    ["WAYLAND_DISPLAY", "DISPLAY"].into_iter().find_map(|var| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(|v| format!("{var}={}", v.to_string_lossy()))
    })
}

/// Runs the bare `supercell` command.
pub fn run(args: &MainArgs) -> Result<()> {
    let dataset = super::builtin_dataset(true)?;
    let no_window = if args.headless {
        "--headless given".to_string()
    } else if let Some(display) = display() {
        // Exactly `supercell play`: the built-in storm scene, with its defaults.
        let play = PlayOnly::try_parse_from(["play"])
            .context("the player's default arguments")?
            .play;
        eprintln!(
            "playing the built-in storm in a window on {display}, as `{}` does (Esc quits, H: help)",
            command_line("supercell", "play")
        );
        match super::play::run(&play) {
            Err(e) if is_no_display(&e) => format!("no window could open on {display}: {e:#}"),
            other => return other,
        }
    } else {
        "no display (DISPLAY and WAYLAND_DISPLAY are unset)".to_string()
    };
    let out = match &args.out {
        Some(d) => d.clone(),
        None => dataset
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
            .join("preview"),
    };
    headless_preview(&dataset, &out, &no_window)
}

/// `supercell play`'s arguments alone, to build its defaults the way its command line does.
#[derive(Parser)]
struct PlayOnly {
    #[command(flatten)]
    play: PlayArgs,
}

fn is_no_display(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<WindowError>(),
        Some(WindowError::NoDisplay(_))
    )
}

/// Plays one path for at most [`HEADLESS_FRAMES`] frames or [`HEADLESS_BUDGET`], as fast as
/// frames arrive, with a progress line on stderr.
fn play_path(player: &mut Player, sel: PathSel) -> Result<PathSummary> {
    player.set_path(sel).map_err(anyhow::Error::msg)?;
    let label = player.path_report(sel).label;
    player.set_playing(true);
    player.set_speed(None);
    player.reset_stats(sel);
    let bar = indicatif::ProgressBar::new(HEADLESS_FRAMES);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{} path ({label}) [{{elapsed}}] {{bar:24}} {{pos}}/{{len}} frames  {{msg}}",
            sel.name()
        ))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let start = Instant::now();
    loop {
        let f = player.figures(sel);
        bar.set_position(f.frames_rendered);
        bar.set_message(format!(
            "{:.1} frames/s, {:.2} GB/s",
            f.rendered_fps, f.gbps_mean
        ));
        let elapsed = start.elapsed();
        if f.frames_rendered >= HEADLESS_FRAMES
            || (f.frames_rendered > 0 && elapsed >= HEADLESS_BUDGET)
        {
            break;
        }
        if elapsed >= FIRST_FRAME_LIMIT {
            bar.finish_and_clear();
            bail!(
                "{} path: no frame rendered in {} s{}",
                sel.name(),
                FIRST_FRAME_LIMIT.as_secs(),
                player
                    .last_error()
                    .map_or(String::new(), |e| format!(" (last error: {e})"))
            );
        }
        if player.tick()?.shown.is_none() {
            player.wait(Duration::from_millis(2));
        }
    }
    bar.finish_and_clear();
    let f = player.figures(sel);
    Ok(PathSummary {
        path: sel.name(),
        label,
        frames_rendered: f.frames_rendered,
        frames_delivered: f.frames_delivered,
        rendered_fps: f.rendered_fps,
        delivered_fps: f.delivered_fps,
        gbps_mean: f.gbps_mean,
        gbps_peak: f.gbps_peak,
        warm_up_s: f.warm_up_s,
        warm_up_frames: f.warm_up_frames,
        bytes_per_frame: f.bytes_per_frame,
        seconds: f.active_s,
    })
}

/// The short headless run: plays the host path (and the direct path where this machine
/// has it), writes `storm.png` and `storm.json` into `out`, and prints the figures and the
/// command that opens the window.
fn headless_preview(dataset: &Path, out: &Path, no_window: &str) -> Result<()> {
    let (width, height) = HEADLESS_SIZE;
    eprintln!("{no_window}: a short headless run of the player at {width}x{height} instead");
    let gpu = PlayerGpu::open_best()?;
    let cfg = super::with_settings(PlayerConfig {
        width,
        height,
        path: PathSel::Host,
        ..PlayerConfig::default()
    })?;
    // The storm scene compiled into the binary (its looks, funnel grid and camera), on the
    // built-in dataset `dataset`.
    let mut scene = Scene::builtin();
    scene.dataset = supercell::scene::DatasetSpec::Path(dataset.to_path_buf());
    let mut player = Player::open_scene(&gpu, &scene, &cfg)?;
    let mut paths = vec![play_path(&mut player, PathSel::Host)?];
    if player.direct_unavailable().is_none() {
        paths.push(play_path(&mut player, PathSel::Direct)?);
    }
    player.drain(Duration::from_secs(5));
    let image = player.read_image()?;

    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let picture = out.join("storm.png");
    let json = out.join("storm.json");
    image
        .write_png(&picture)
        .with_context(|| format!("writing {}", picture.display()))?;
    let window_command = command_line("supercell", "play");
    let report = MainReport {
        schema: SCHEMA,
        date: headless::iso8601(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        ),
        machine: headless::machine(gpu.describe()),
        scene: format!("built-in {BUILTIN_SCENE_FILE}"),
        dataset: dataset.display().to_string(),
        attributes: player.attribute_names(),
        size: [width, height],
        picture: picture.display().to_string(),
        no_window: no_window.to_string(),
        window_command: window_command.clone(),
        paths,
    };
    let text = serde_json::to_string_pretty(&report)? + "\n";
    std::fs::write(&json, text).with_context(|| format!("writing {}", json.display()))?;

    println!(
        "the built-in storm at {width}x{height} on {}:",
        report.machine.adapter
    );
    for p in &report.paths {
        println!(
            "  {:<6} {:<22} {:5.2} frames/s rendered, {:5.2} delivered, {:.2} GB/s (averages; GB/s peak {} after warm-up: {}), {:.0} MB per frame, {} frames",
            p.path,
            p.label,
            p.rendered_fps,
            p.delivered_fps,
            p.gbps_mean,
            peak_text(p.gbps_peak),
            match p.warm_up_s {
                Some(s) => format!("{s:.1} s, {} frames", p.warm_up_frames),
                None => format!("ring still filling, {} frames", p.warm_up_frames),
            },
            p.bytes_per_frame / 1e6,
            p.frames_rendered
        );
    }
    if let Some(why) = player.direct_unavailable() {
        println!("  direct unavailable here: {why}");
    }
    println!("picture: {}", picture.display());
    println!("figures: {}", json.display());
    println!("open the window (where there is a display, or over ssh -X): {window_command}");
    Ok(())
}
