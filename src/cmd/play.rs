//! `supercell play`: the player — a window with the live overlay, a kiosk mode for the show
//! floor, and a headless measurement run that writes JSON.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use supercell::app::headless::{self, DatasetReport, HeadlessOptions, HeadlessReport, Phase};
use supercell::app::software::{self, Requested};
use supercell::app::window::{self, PlayOn, WindowOptions};
use supercell::app::{
    DirectEngine, HostCopy, PathSel, PlayError, PlayerConfig, PlayerGpu, script, soak,
};
use supercell::pipeline::PlayMode;
use supercell::scene::{PlaybackDefaults, Scene};

/// Which paths a headless run measures.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathArg {
    /// GPUDirect Storage (or staged CUDA copies) into shared GPU buffers.
    Direct,
    /// Host memory, uploaded through wgpu.
    Host,
    /// Host, then direct (toggled at run time, as the D key does).
    Both,
}

/// The host path's route to the GPU on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum HostCopyArg {
    /// The GPU copies from the host slots where the device can import host memory.
    Auto,
    /// The CPU copies each frame into a staging buffer first (for comparison).
    Staging,
    /// Reads land in a small ring of imported host buffers; the GPU copies each into the
    /// slot as it lands (no host slots).
    Ring,
}

/// The direct path's engine on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum DirectEngineArg {
    /// GDS where cuFile reads peer to peer, else staged.
    Auto,
    /// cuFile (GPUDirect Storage), in whatever mode it runs.
    Gds,
    /// Staged CUDA copies through pinned host buffers.
    Staged,
}

/// End-of-timeline behaviour on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ModeArg {
    /// Wrap around.
    Loop,
    /// Reverse at either end.
    PingPong,
    /// Stop at the end.
    Once,
}

/// Arguments of `supercell play`.
#[derive(clap::Args, Debug)]
pub struct PlayArgs {
    /// Scene file (`.toml`) or dataset directory (played with its default look); when
    /// omitted, the storm scene compiled into the binary (`scenes/storm.toml`) on the
    /// built-in dataset.
    pub scene: Option<PathBuf>,
    /// No window: play, measure, and write `--json`.
    #[arg(long)]
    pub headless: bool,
    /// Headless: frames to show per path.
    #[arg(long, default_value_t = 100)]
    pub frames: u64,
    /// Path: headless, which to measure; windowed, which to start on.
    #[arg(long, value_enum, default_value = "both")]
    pub path: PathArg,
    /// Headless render size `WxH` (default: 1280x720; on a software Vulkan adapter the
    /// software window times its render scale, 120x68). In a window the render size is the
    /// window's times `--render-scale`.
    #[arg(long)]
    pub size: Option<String>,
    /// Headless: write the results here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Headless: after the run, write the picture a window would show (the last frame and
    /// the overlay with both paths' figures), composed offscreen, to this PNG.
    #[arg(long, requires = "headless")]
    pub screenshot: Option<PathBuf>,
    /// Headless: play the first `--frames` frames once each, in order, and write every
    /// presented frame to this folder as `frame_NNNNN.png`. Under `mpirun` (a build with
    /// the `mpi` feature) the ranks render alternate frames, each with its own engine and
    /// renderer, and rank 0 presents them in order; one process runs the same code.
    #[arg(long, requires = "headless", value_name = "DIR")]
    pub frames_out: Option<PathBuf>,
    /// Window: the folder Shift+R's movies go to, each named by the time it starts
    /// (`supercell-YYYYMMDD-HHMMSS.mp4`, UTC; default: the current folder).
    #[arg(long)]
    pub record_dir: Option<PathBuf>,
    /// Headless: timed jumps to random frames per path (scrub latency).
    #[arg(long, default_value_t = 12)]
    pub scrub_jumps: usize,
    /// Headless: instead of measuring each path, run this long (e.g. `2h`) as a kiosk
    /// would (looping, camera flying, `--toggle-every` flips; frames as fast as they arrive)
    /// and sample memory, file descriptors and threads every `--sample-every`; the JSON gets
    /// a `soak` section.
    #[arg(long, requires = "headless")]
    pub soak: Option<String>,
    /// Headless `--soak`: sampling interval.
    #[arg(long, default_value = "1s")]
    pub sample_every: String,
    /// Headless: give up on a path's playback after this long, and on its jumps after as
    /// long again. Across MPI ranks (headless or in the window): how long a rank may send
    /// nothing before it is named and the run ends.
    #[arg(long, default_value = "300s")]
    pub timeout: String,
    /// Ring slots per path (default: from frame size and memory, 3 to 8).
    #[arg(long)]
    pub slots: Option<usize>,
    /// I/O threads per engine.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Check every extent's CRC-32 as it arrives (on the GPU for the direct path, on CPU
    /// threads for the host path); a frame that fails is not shown.
    #[arg(long)]
    pub verify: bool,
    /// How the host path moves frames to the GPU.
    #[arg(long, value_enum, default_value = "auto")]
    pub host_copy: HostCopyArg,
    /// The direct path's engine: auto picks GPUDirect Storage where cuFile reads peer to peer
    /// and staged CUDA copies where cuFile would run in compatibility mode (slower there);
    /// the overlay and the JSON name the engine that runs.
    #[arg(long, value_enum, default_value = "auto")]
    pub direct_engine: DirectEngineArg,
    /// Attributes in slot order, comma-separated (default: the scene's; on a software Vulkan
    /// adapter only its first two start shown).
    #[arg(long, value_delimiter = ',')]
    pub attributes: Option<Vec<String>>,
    /// Target playback rate, frames/s: the rate the player aims at, not one it measures (the
    /// figures say what it reaches); 0: as fast as frames arrive (default: the scene's, 24).
    #[arg(long)]
    pub fps: Option<f64>,
    /// End-of-timeline behaviour (default: the scene's, loop).
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// First frame (default: the scene's, 0).
    #[arg(long)]
    pub start_frame: Option<u32>,
    /// Start paused.
    #[arg(long)]
    pub paused: bool,
    /// Trade-show mode: fullscreen, large print, loops forever, camera flies.
    #[arg(long)]
    pub kiosk: bool,
    /// Flip direct/host on a timer (e.g. `20s`).
    #[arg(long)]
    pub toggle_every: Option<String>,
    /// Start fullscreen.
    #[arg(long)]
    pub fullscreen: bool,
    /// Large print (readable from two metres).
    #[arg(long)]
    pub large_print: bool,
    /// Render at this fraction of the window size, which the window scales up (default: 1;
    /// 0.125 on a software Vulkan adapter such as lavapipe).
    #[arg(long)]
    pub render_scale: Option<f32>,
    /// Window size `WxH` at start (default: 1280x720; 960x540 on a software Vulkan adapter).
    #[arg(long)]
    pub window_size: Option<String>,
    /// Ray-march step length in voxels of the finest grid (default: the scene's, 1; on a
    /// software Vulkan adapter 2, with adaptive steps of at least 0.6 optical depth).
    #[arg(long)]
    pub step: Option<f32>,
    /// Scripted input: commands or a file (see `supercell::app::script`).
    #[arg(long)]
    pub script: Option<String>,
    /// Quit after this many frames have been shown.
    #[arg(long)]
    pub exit_after: Option<u64>,
    /// How long a frame's reads may go without progress before the frame is marked damaged
    /// and playback goes on (a lane that stopped answering): 10 (seconds), 500ms, 1min;
    /// 0: wait forever.
    #[arg(long, default_value = "10s", value_parser = supercell::units::parse_duration)]
    pub read_timeout: Duration,
    /// Play on several GPUs of this host, alternate frames each (`all`, a count `N`, or
    /// ordinals `0,1`; one may be named twice, `0,0`): each GPU its own engines, rings and
    /// renderer; GPU 0 presents (in the window, or headless), the others' images copied
    /// through the host. Every play mode, either direction. Under `mpirun`: the GPUs of
    /// each rank's host that it plays (give every rank the same list).
    #[arg(long, value_parser = supercell::bench::jobs::parse_gpus)]
    pub gpus: Option<supercell::bench::jobs::GpuSelection>,
    /// Tests only: a second host path stands in for the direct path (labelled "loopback
    /// (test)"), so the path toggle runs where no CUDA is (`play --frames-out` and across
    /// MPI ranks).
    #[arg(long, hide = true)]
    pub loopback_direct: bool,
}

/// A duration flag's value, or an error naming the flag and the value.
pub(super) fn duration_flag(flag: &str, value: &str) -> anyhow::Result<Duration> {
    script::parse_duration(value).map_err(|e| anyhow::anyhow!("{flag}: {e}"))
}

/// Largest side of a window or headless render, pixels.
const MAX_SIDE: u32 = 16384;

/// Player settings: the command line over the scene's `[playback]` defaults.
pub(super) fn player_config(
    args: &PlayArgs,
    size: (u32, u32),
    defaults: &PlaybackDefaults,
) -> anyhow::Result<PlayerConfig> {
    if let Some(f) = args.fps
        && !(f.is_finite() && f >= 0.0)
    {
        bail!("--fps must be a number ≥ 0 (0: as fast as frames arrive)");
    }
    let fps = args.fps.unwrap_or(defaults.fps);
    if args.threads == 0 || args.threads > 256 {
        bail!("--threads must be 1..256");
    }
    let threads = super::io_threads("--threads", args.threads);
    supercell::stream::check_slots(args.slots).map_err(anyhow::Error::msg)?;
    super::with_settings(PlayerConfig {
        attributes: args.attributes.clone(),
        width: size.0,
        height: size.1,
        slots: args.slots,
        threads,
        host_copy: match args.host_copy {
            HostCopyArg::Auto => HostCopy::Auto,
            HostCopyArg::Staging => HostCopy::Staging,
            HostCopyArg::Ring => HostCopy::Ring,
        },
        direct_engine: match args.direct_engine {
            DirectEngineArg::Auto => DirectEngine::Auto,
            DirectEngineArg::Gds => DirectEngine::Gds,
            DirectEngineArg::Staged => DirectEngine::Staged,
        },
        path: match args.path {
            PathArg::Host => PathSel::Host,
            PathArg::Direct => PathSel::Direct,
            PathArg::Both if defaults.direct => PathSel::Direct,
            PathArg::Both => PathSel::Host,
        },
        mode: match args.mode {
            Some(ModeArg::Loop) => PlayMode::Loop,
            Some(ModeArg::PingPong) => PlayMode::PingPong,
            Some(ModeArg::Once) => PlayMode::Once,
            None => defaults.mode,
        },
        speed_fps: (fps > 0.0).then_some(fps),
        playing: !args.paused && defaults.playing,
        start_frame: args.start_frame.unwrap_or(defaults.start_frame),
        start_at_data: args.start_frame.is_none(),
        verify: args.verify,
        read_timeout: (!args.read_timeout.is_zero()).then_some(args.read_timeout),
        loopback_direct: args.loopback_direct,
        ..PlayerConfig::default()
    })
}

/// Flags that only mean something with a window, refused with `--headless` rather than
/// ignored: a headless run measures fixed paths and has no keys, overlay or screen to
/// script.
pub(super) fn refuse_window_flags(args: &PlayArgs) -> anyhow::Result<()> {
    if !args.headless {
        return Ok(());
    }
    for (given, flag) in [
        (args.script.is_some(), "--script"),
        (args.exit_after.is_some(), "--exit-after"),
        (args.kiosk, "--kiosk"),
        (args.fullscreen, "--fullscreen"),
        (args.record_dir.is_some(), "--record-dir"),
    ] {
        if given {
            bail!(
                "{flag} drives the window and cannot be used with --headless (a headless run \
                 measures each path for --frames frames; script a window instead, under Xvfb \
                 where there is no display)"
            );
        }
    }
    Ok(())
}

/// The sizes and steps the command line fixed (the adapter's defaults fill in the rest:
/// [`software::choose`]).
pub(super) fn requested(args: &PlayArgs) -> anyhow::Result<Requested> {
    if let Some(s) = args.render_scale
        && !(s.is_finite() && s > 0.0 && s <= 4.0)
    {
        bail!("--render-scale must be in (0, 4]");
    }
    if let Some(s) = args.step
        && !supercell::render::limits::STEP_VOXELS.contains(f64::from(s))
    {
        bail!(
            "--step {s}: the step length in voxels must be {}",
            supercell::render::limits::STEP_VOXELS.describe()
        );
    }
    Ok(Requested {
        headless: args.headless,
        window_size: args
            .window_size
            .as_deref()
            .map(|s| supercell::units::parse_image_size("--window-size", s, MAX_SIDE))
            .transpose()?,
        render_scale: args.render_scale,
        size: args
            .size
            .as_deref()
            .map(|s| supercell::units::parse_image_size("--size", s, MAX_SIDE))
            .transpose()?,
        step_voxels: args.step,
        attributes: args.attributes.is_some(),
    })
}

/// Runs `supercell play`.
pub fn run(args: &PlayArgs) -> anyhow::Result<()> {
    refuse_window_flags(args)?;
    // Bad values are refused before a dataset is made or a device opened.
    let req = requested(args)?;
    let scene = choose_scene(args.scene.as_deref())?;
    let gpus = args.gpus.as_ref().map(resolve_gpus).transpose()?;
    if args.headless {
        headless_run(args, &req, &scene, gpus.as_deref())
    } else {
        window_run(args, req, scene, gpus)
    }
}

/// The scene a run plays, and how its reports name it.
pub struct ChosenScene {
    /// The scene, loaded.
    pub scene: Scene,
    /// The scene file or dataset directory given, or `built-in scenes/storm.toml`.
    pub name: String,
    /// The dataset: the path given, or the built-in dataset's directory.
    pub dataset: String,
}

/// The scene file or dataset directory `arg`; without one, the built-in storm scene
/// (compiled into the binary) on the built-in dataset, which is created here if missing.
pub fn choose_scene(arg: Option<&std::path::Path>) -> anyhow::Result<ChosenScene> {
    match arg {
        Some(p) => {
            if !p.exists() {
                bail!("{}: no such scene file or dataset", p.display());
            }
            Ok(ChosenScene {
                scene: super::with_dataset(Scene::load(p)?)?,
                name: p.display().to_string(),
                dataset: p.display().to_string(),
            })
        }
        None => {
            let dir = super::builtin_dataset(true)?;
            let mut scene = Scene::builtin();
            scene.dataset = supercell::scene::DatasetSpec::Path(dir.clone());
            Ok(ChosenScene {
                scene,
                name: format!("built-in {}", supercell::scene::BUILTIN_SCENE_FILE),
                dataset: dir.display().to_string(),
            })
        }
    }
}

/// A progress bar on stderr (hidden where stderr is not a terminal).
pub(super) fn progress_bar(template: &str) -> indicatif::ProgressBar {
    // Drawn on stderr, and only where stderr is a terminal.
    let bar = indicatif::ProgressBar::no_length();
    bar.set_style(
        indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// `play --headless`: the coordinator over the GPUs of `--gpus` (`ordinals`), else over
/// the best adapter alone; each path measured (or, with `--soak`, the long run), the
/// picture with the overlay where `--screenshot` asks, the report printed and written.
fn headless_run(
    args: &PlayArgs,
    req: &Requested,
    scene: &ChosenScene,
    ordinals: Option<&[usize]>,
) -> anyhow::Result<()> {
    use supercell::app::gpus::MultiPlayer;
    if args.frames == 0 {
        bail!("--frames must be at least 1");
    }
    let timeout = duration_flag("--timeout", &args.timeout)?;
    let (opened, best) = match ordinals {
        Some(o) => (supercell::app::gpus::open_gpus(o)?, None),
        None => (Vec::new(), Some(PlayerGpu::open_best()?)),
    };
    for (k, g) in opened.iter().enumerate() {
        eprintln!("play: GPU {k} (--gpus {}): {}", g.ordinal, g.matched);
    }
    let caps = best
        .as_ref()
        .map_or_else(|| &opened[0].gpu.caps, |g| &g.caps);
    let settings = software::choose(caps, req);
    if let Some(note) = &settings.note {
        eprintln!("play: {note}");
    }
    // Headless measures as fast as frames arrive, whatever the scene's playback says.
    let cfg = player_config(args, settings.size, &PlaybackDefaults::default())?;
    let mut mp = match best {
        Some(gpu) => MultiPlayer::open_one(gpu, &scene.scene, &cfg)?,
        None => MultiPlayer::open_scene(opened, &scene.scene, &cfg)?,
    };
    let one = mp.gpu_count() == 1;
    for k in 0..mp.gpu_count() {
        settings.apply_view(mp.player_mut(k).view_mut());
        let line = mp.player(k).slot_plan().line();
        match one {
            true => eprintln!("play: {line}"),
            false => eprintln!("play: GPU {k}: {line}"),
        }
    }
    for note in mp.player(0).scene_notes() {
        eprintln!("play: {note}");
    }
    let soak = match &args.soak {
        Some(d) => Some(soak_run(args, d, |opts, progress| {
            soak::run(&mut mp, opts, progress)
        })?),
        None => None,
    };
    let paths = if soak.is_some() {
        Vec::new()
    } else {
        paths_of(args.path)
    };
    let bar = progress_bar("{prefix} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}");
    let runs = supercell::app::gpus::run_paths(
        &mut mp,
        &HeadlessOptions {
            frames: args.frames,
            paths,
            scrub_jumps: args.scrub_jumps,
            timeout,
        },
        &mut |p| show_progress(&bar, &p, "frames presented"),
    );
    bar.finish_and_clear();
    if let Some(path) = &args.screenshot {
        // Before the drain: the figures' "now" columns still describe the run.
        screenshot(&mut mp, &runs, settings.size, path)?;
    }
    mp.drain(Duration::from_secs(10));
    let mut report = headless_report(args, scene, settings, &mp, runs);
    if soak.is_some() {
        report.frames_per_path = 0;
    }
    report.soak = soak;
    end_headless_run(args, &report)?;
    soak_verdict(report.soak.as_ref())
}

/// `--screenshot`: the picture a window would show after the run — the presented image
/// and the overlay (the display GPU's two-path panel; several GPUs' rows) — written to
/// `path`.
fn screenshot(
    mp: &mut supercell::app::gpus::MultiPlayer,
    runs: &[headless::PathRun],
    size: (u32, u32),
    path: &std::path::Path,
) -> anyhow::Result<()> {
    let mut ui = supercell::app::overlay::UiState::new(size);
    ui.presets = supercell::app::overlay::presets_for(mp.player(0));
    // What the window samples as it runs: CPU use (here over the active path's run, the
    // last one) and GPU memory in use.
    ui.cpu_percent = runs
        .iter()
        .rev()
        .find(|r| r.ran)
        .map_or(0.0, |r| r.cpu_percent);
    ui.gpu_memory = supercell::app::gpumem::gpu_memory(mp.player(0).device());
    if mp.gpu_count() > 1 {
        ui.gpus = Some(mp.overlay());
    }
    let lead = mp.player(0);
    supercell::app::offscreen::write_picture_png(lead, mp.presented_image(), &mut ui, size, path)
        .map_err(|e| anyhow::anyhow!("--screenshot {}: {e}", path.display()))?;
    eprintln!("play: picture with the overlay: {}", path.display());
    Ok(())
}

/// Fails a long run that saw errors, or whose memory, descriptors or threads grew over a
/// run long enough to tell (every rank's, across ranks).
pub(super) fn soak_verdict(soak: Option<&soak::SoakReport>) -> anyhow::Result<()> {
    if let Some(soak) = soak
        && !soak.errors.is_empty()
    {
        bail!("soak: {}", soak.errors.join("; "));
    }
    if let Some(v) = soak.and_then(|s| s.verdict.as_ref())
        && !v.flat
        && v.settled_s >= soak::SETTLED_FOR_VERDICT_S
    {
        bail!("soak: memory not flat: {}", v.reasons.join(", "));
    }
    Ok(())
}

/// `play --headless --soak D`: the soak (`run`, on one player or across ranks), with a
/// progress bar (or, where stderr is no terminal, a line every twentieth of the run) and
/// its summary on stderr.
pub(super) fn soak_run(
    args: &PlayArgs,
    d: &str,
    run: impl FnOnce(
        &soak::SoakOptions,
        &mut dyn FnMut(&soak::SoakSample),
    ) -> Result<soak::SoakReport, PlayError>,
) -> anyhow::Result<soak::SoakReport> {
    let duration = duration_flag("--soak", d)?;
    let sample_every = duration_flag("--sample-every", &args.sample_every)?;
    if sample_every.is_zero() {
        bail!("--sample-every must be positive");
    }
    let toggle_every = args
        .toggle_every
        .as_deref()
        .map(|d| duration_flag("--toggle-every", d))
        .transpose()?
        .filter(|d| !d.is_zero());
    let opts = soak::SoakOptions {
        duration,
        toggle_every,
        sample_every,
    };
    let bar = progress_bar("soak {bar:30} {pos}/{len} s  {msg}");
    bar.set_length(duration.as_secs().max(1));
    // Where stderr is no terminal (a booth's log, a service), a line every
    // twentieth of the run (10 s to 5 min apart) instead of the bar.
    let every = (duration.as_secs_f64() / 20.0).clamp(10.0, 300.0);
    let mut next_line = every;
    let r = run(&opts, &mut |s| {
        let line = format!(
            "{} frames, RSS {:.0} MB, {} fds, {} threads",
            s.frames,
            s.rss as f64 / 1e6,
            s.fds,
            s.threads
        );
        if bar.is_hidden() {
            if s.t_s >= next_line {
                eprintln!("soak {:.0}/{} s: {line}", s.t_s, duration.as_secs());
                next_line = s.t_s + every;
            }
        } else {
            bar.set_position(s.t_s as u64);
            bar.set_message(line);
        }
    })?;
    bar.finish_and_clear();
    eprint!("{}", soak::summary(&r));
    Ok(r)
}

fn window_run(
    args: &PlayArgs,
    req: Requested,
    scene: ChosenScene,
    gpus: Option<Vec<usize>>,
) -> anyhow::Result<()> {
    let play_on = match gpus {
        Some(g) => PlayOn::Gpus(g),
        None => PlayOn::One,
    };
    window::run(window_options(args, req, scene, play_on)?)?;
    Ok(())
}

/// The window's player settings: the command line over the scene's `[playback]` (a kiosk
/// loops and plays). Across ranks every rank opens its player with these.
pub(super) fn window_player_config(
    args: &PlayArgs,
    req: &Requested,
    scene: &Scene,
) -> anyhow::Result<PlayerConfig> {
    // The window sets the render size from its own (and the adapter's defaults).
    let window_size = req.window_size.unwrap_or(software::WINDOW);
    let mut cfg = player_config(args, window_size, &scene.playback)?;
    if args.kiosk {
        cfg.mode = PlayMode::Loop;
        cfg.playing = true;
    }
    Ok(cfg)
}

/// What the window does, from the command line, the scene and where its players run.
pub(super) fn window_options(
    args: &PlayArgs,
    req: Requested,
    scene: ChosenScene,
    play_on: PlayOn,
) -> anyhow::Result<WindowOptions> {
    let scene_file = scene.scene;
    let cfg = window_player_config(args, &req, &scene_file)?;
    let overlay = &scene_file.overlay;
    // Scene::load checked plot_window_s against the same bounds.
    let plot_window_s = overlay.plot_window_s;
    let toggle_every = args
        .toggle_every
        .as_deref()
        .map(|d| duration_flag("--toggle-every", d))
        .transpose()?;
    if toggle_every.is_some_and(|d| d < Duration::from_millis(100)) {
        bail!("--toggle-every must be at least 100ms");
    }
    let script = args
        .script
        .as_deref()
        .map(script::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?
        .unwrap_or_default();
    if let Some(d) = args.record_dir.as_deref().filter(|d| !d.is_dir()) {
        bail!("--record-dir {}: no such folder", d.display());
    }
    Ok(WindowOptions {
        scene: scene_file.clone(),
        player: cfg,
        requested: req,
        fullscreen: args.fullscreen || args.kiosk,
        large_print: args.large_print || args.kiosk || overlay.large_print,
        plots: overlay.plots,
        plot_window_s,
        help: overlay.show_help,
        kiosk: args.kiosk,
        toggle_every,
        script,
        exit_after: args.exit_after,
        play_on,
        warn: |m| eprintln!("play: warning: {m}"),
        record: window::RecordOptions {
            dir: args.record_dir.clone(),
            ffmpeg: std::env::var_os("PATH")
                .and_then(|p| supercell::app::movie::find_in(&p, "ffmpeg")),
        },
    })
}

/// The ordinals `--gpus` names (CUDA's count checks them where CUDA runs).
pub fn resolve_gpus(
    selection: &supercell::bench::jobs::GpuSelection,
) -> anyhow::Result<Vec<usize>> {
    let cuda_devices = supercell::gpu::cuda_probe()
        .is_ok()
        .then(supercell::gpu::device_count);
    selection
        .resolve(cuda_devices)
        .map_err(|e| anyhow::anyhow!("--gpus: {e}"))
}

/// The coordinator's report (one GPU, several, or across ranks): the paths' runs `runs` of
/// `mp`, on its GPUs' adapters.
pub(super) fn headless_report(
    args: &PlayArgs,
    scene: &ChosenScene,
    settings: software::Interactive,
    mp: &supercell::app::gpus::MultiPlayer,
    runs: Vec<headless::PathRun>,
) -> HeadlessReport {
    let adapters: Vec<String> = (0..mp.gpu_count())
        .map(|k| mp.workers().name(k).device.clone())
        .collect();
    let size = settings.size;
    let p0 = mp.player(0);
    let m = p0.manifest();
    HeadlessReport {
        schema: headless::SCHEMA.into(),
        date: headless::iso8601(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        ),
        machine: headless::machine(adapters.join("; ")),
        scene: scene.name.clone(),
        dataset: DatasetReport {
            path: scene.dataset.clone(),
            frames: mp.frame_count(),
            lanes: m.lanes.len(),
            attributes: p0.attribute_names(),
            bytes_per_frame: p0.mean_frame_bytes(),
            total_bytes: m.total_bytes(),
        },
        size: [size.0, size.1],
        slots: p0.slots(),
        slot_plan: p0.slot_plan().clone(),
        frames_per_path: args.frames,
        paths: runs,
        soak: None,
        settings: Some(settings),
    }
}

/// Prints the coordinator's `report`, writes its JSON where asked, and fails where a path that
/// was asked for failed.
pub(super) fn end_headless_run(args: &PlayArgs, report: &HeadlessReport) -> anyhow::Result<()> {
    eprint!("{}", headless::summary(report));
    if let Some(p) = &args.json {
        let text = serde_json::to_string_pretty(report)?;
        std::fs::write(p, text + "\n").with_context(|| format!("{}", p.display()))?;
    }
    for r in &report.paths {
        if let Some(e) = &r.error {
            let unavailable = !r.info.available;
            if !(unavailable && args.path == PathArg::Both) {
                bail!("{} path: {e}", r.info.path.name());
            }
        }
    }
    Ok(())
}

/// The paths a headless run plays, in order (both: host first, then direct).
pub(super) fn paths_of(path: PathArg) -> Vec<PathSel> {
    match path {
        PathArg::Direct => vec![PathSel::Direct],
        PathArg::Host => vec![PathSel::Host],
        PathArg::Both => vec![PathSel::Host, PathSel::Direct],
    }
}

/// Shows a headless run's progress on `bar`: the path, and `frames` or jumps done.
pub(super) fn show_progress(
    bar: &indicatif::ProgressBar,
    p: &headless::Progress,
    frames: &'static str,
) {
    bar.set_prefix(format!("play {}", p.path.name()));
    bar.set_length(p.planned);
    bar.set_position(p.done);
    bar.set_message(match p.phase {
        Phase::Playing => frames,
        Phase::Scrubbing => "jumps",
    });
}
