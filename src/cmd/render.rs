//! `supercell render`: headless rendering of dataset frames to PNG (and linear PFM), and the
//! renderer's timing mode (`--bench`).
//!
//! Each frame is read whole, but only the parts its shown attributes' grids span are
//! uploaded and bound, so a frame of more parts than the device binds at once (over 4 GiB on
//! lavapipe) renders while those grids fit; a frame whose shown grids do not is refused
//! before it is read, naming the attributes and their bytes.

use std::path::PathBuf;

use anyhow::{Context, bail};
use supercell::app::legend::{Annotation, annotate};
use supercell::dataset::{AlignedBuf, CrcCheck};
use supercell::render::{
    Camera, FrameCapacity, GpuContext, GridInParts, Mode, Projection, Renderer, SlotPart, limits,
    parts_spanned, try_upload_slot,
};
use supercell::scene::{LoadedScene, Scene};

mod bench;
mod split;

use super::render_path::{DEFAULT_SPP, Stop, converge, refine, show};
use super::{movie, watchdog};

/// `--denoise`: on or off.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
}

/// Rendering mode on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ModeArg {
    /// Emission-absorption with sun, sky, shadows and ground.
    Shaded,
    /// Maximum-intensity projection.
    Mip,
    /// Isosurface of an attribute at `--iso` (default: the scene's `iso_value`).
    Iso,
    /// Path traced: multiple scattering of sun and sky light through the same medium,
    /// `--spp` samples per pixel (or `--time-budget`); `--linear` writes radiance before
    /// exposure.
    Path,
}

/// `--split`: how the ranks share each frame.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitArg {
    /// Each rank its spatial brick of every frame (sort-last).
    Space,
}

/// Arguments of `supercell render`.
#[derive(clap::Args, Clone, Debug)]
pub struct RenderArgs {
    /// Scene file (`.toml`) or dataset directory.
    pub scene: PathBuf,
    /// Frame to render.
    #[arg(long, default_value_t = 0)]
    pub frame: usize,
    /// Range of frames instead, `A..B` (B excluded) or `A..=B`.
    #[arg(long)]
    pub frames: Option<String>,
    /// Image size, `WIDTHxHEIGHT`.
    #[arg(long, default_value = "1280x720")]
    pub size: String,
    /// Output directory (PNG per frame: `frame_00012.png`).
    #[arg(long, default_value = "render-out")]
    pub out: PathBuf,
    /// Also write the linear float image (`frame_00012.pfm`, RGB, rows bottom-up; radiance
    /// before exposure and tone mapping).
    #[arg(long)]
    pub linear: bool,
    /// Rendering mode (default: the scene's, else shaded).
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Attributes in slot order, comma-separated, each with the scene's look where the scene
    /// has it (default: the scene's, else cloud,rain,wind_speed).
    #[arg(long, value_delimiter = ',')]
    pub attributes: Option<Vec<String>>,
    /// Isosurface value (isosurface mode; default: the scene's `iso_value`).
    #[arg(long, allow_hyphen_values = true)]
    pub iso: Option<f32>,
    /// Orthographic camera.
    #[arg(long)]
    pub ortho: bool,
    /// Camera from the scene's camera path at this time, seconds (default: the scene's
    /// camera).
    #[arg(long)]
    pub path_time: Option<f64>,
    /// Camera azimuth, degrees.
    #[arg(long, allow_hyphen_values = true)]
    pub yaw: Option<f32>,
    /// Camera elevation, degrees.
    #[arg(long, allow_hyphen_values = true)]
    pub pitch: Option<f32>,
    /// Zoom factor (> 1 closer).
    #[arg(long)]
    pub zoom: Option<f32>,
    /// Step length in voxels.
    #[arg(long)]
    pub step: Option<f32>,
    /// March with fixed steps (no empty-space skipping, no adaptive steps).
    #[arg(long)]
    pub no_hdda: bool,
    /// No shadow rays.
    #[arg(long)]
    pub no_shadows: bool,
    /// No ground plane.
    #[arg(long)]
    pub no_ground: bool,
    /// Render with the CPU reference renderer instead (slow; for comparisons).
    #[arg(long)]
    pub cpu: bool,
    /// Path mode: samples per pixel (default 64).
    #[arg(long, conflicts_with = "time_budget")]
    pub spp: Option<u32>,
    /// Path mode: path trace each frame for this many seconds instead of `--spp`.
    #[arg(long)]
    pub time_budget: Option<f64>,
    /// Path mode: show the denoised mean (`on`, the default) or the raw accumulated mean
    /// (`off`: unbiased, e.g. for `--linear` comparisons). Knobs: SUPERCELL_DENOISE_LEVELS,
    /// SUPERCELL_DENOISE_SIGMA, SUPERCELL_DENOISE_SIGMA_PER_LEVEL, SUPERCELL_DENOISE_EPS.
    #[arg(long, value_enum)]
    pub denoise: Option<OnOff>,
    /// Path mode: scattering events per path at most (default: the scene's
    /// `path_max_bounces`, 16).
    #[arg(long)]
    pub max_bounces: Option<u32>,
    /// Path mode: convergence report for `--frame`: a reference of REF_SPP samples per
    /// pixel, then relMSE against it and time at 1, 2, 4, .. samples; prints a table and
    /// writes `--converge-json`.
    #[arg(long, value_name = "REF_SPP")]
    pub converge: Option<u32>,
    /// Where `--converge` writes its JSON (default: OUT/converge.json).
    #[arg(long)]
    pub converge_json: Option<PathBuf>,
    /// Timing mode: renders `--frame` repeatedly at each `--bench-sizes` size, with and
    /// without empty-space skipping, and prints ms/frame.
    #[arg(long)]
    pub bench: bool,
    /// Sizes for `--bench` (default: 1280x720,1920x1080,3840x2160; on a software Vulkan
    /// adapter such as lavapipe one size, 320x180, since each 720p render takes seconds there).
    #[arg(long, value_delimiter = ',')]
    pub bench_sizes: Option<Vec<String>>,
    /// Timed renders per size and mode for `--bench`, after 3 warm-up renders (default: 20;
    /// 5 on a software Vulkan adapter).
    #[arg(long)]
    pub bench_frames: Option<u32>,
    /// Also write the `--bench` results as JSON here.
    #[arg(long)]
    pub bench_json: Option<PathBuf>,
    /// Render `--frames` on several GPUs of this host, alternate frames each (`all`, a count
    /// `N`, or ordinals `0,1`; one may be named twice): each GPU reads, renders and writes
    /// its own frames.
    #[arg(long, value_parser = supercell::bench::jobs::parse_gpus,
          conflicts_with_all = ["cpu", "bench", "converge"])]
    pub gpus: Option<supercell::bench::jobs::GpuSelection>,
    /// Also encode the rendered frames as a video, NAME.mp4 (with the system's ffmpeg: H.264
    /// where it has libx264). The camera flies the scene's camera path across the frames at
    /// `--fps` (from `--path-time`, else its start) unless `--yaw`, `--pitch`, `--zoom` or
    /// `--ortho` fix it. The PNG frames still go to `--out`.
    #[arg(long, value_name = "NAME.mp4", conflicts_with_all = ["cpu", "bench", "converge", "gpus"])]
    pub movie: Option<PathBuf>,
    /// `--movie`: frames per second of the video, one dataset frame each (default: the
    /// scene's playback rate, 24).
    #[arg(long, requires = "movie")]
    pub fps: Option<f64>,
    /// `--movie`: the ffmpeg to encode with (default: `ffmpeg` on PATH).
    #[arg(long, value_name = "PATH", requires = "movie")]
    pub ffmpeg: Option<PathBuf>,
    /// How long a frame's read may take before the command gives up (a lane that stopped
    /// answering): 60 (seconds), 500ms, 2min; 0: wait forever. Frames are read whole, so
    /// allow for the slowest frame's read.
    #[arg(long, default_value = "60s", value_parser = supercell::units::parse_duration)]
    pub read_timeout: std::time::Duration,
    /// Sort-last rendering across MPI ranks, for frames larger than one GPU holds:
    /// `space` (under `mpirun -n N`, a dataset written with `--bricks N`): each rank reads
    /// and draws only its brick of every frame, and the ranks composite their images in
    /// visibility order onto rank 0, which writes the frames. Shaded mode only.
    #[arg(long, value_enum, conflicts_with_all = ["cpu", "bench", "converge", "gpus", "movie"])]
    pub split: Option<SplitArg>,
    /// Refuse a frame whose grids shown (on this rank, with `--split`) exceed this many
    /// bytes (`512MiB`, `2GB`): a guard for a GPU's memory, and how the tests force a frame
    /// over one rank's budget.
    #[arg(long, value_parser = supercell::units::parse_size)]
    pub frame_budget: Option<u64>,
    /// Burn a legend into each PNG: per shown attribute a colour bar (its colormap, and its
    /// opacity over a checkerboard) with name, unit and range, and the frame's time (also
    /// the scene's `[overlay] annotate = true`). `--linear` images stay as rendered.
    #[arg(long)]
    pub annotate: bool,
}

/// `--size` (the device's upper bound, `Renderer::check_image_size`, is checked once it
/// is open).
fn parse_size(s: &str) -> anyhow::Result<(u32, u32)> {
    Ok(supercell::units::parse_image_size("--size", s, u32::MAX)?)
}

/// Refuses an image size the device (or, for the CPU renderer, host memory) cannot hold,
/// naming the flag.
fn check_size(flag: &str, renderer: Option<&Renderer>, w: u32, h: u32) -> anyhow::Result<()> {
    let checked = match renderer {
        Some(r) => r.check_image_size(w, h).map_err(anyhow::Error::from),
        // The CPU renderer keeps an RGBA8 and a linear RGBA32F image.
        None => supercell::memory::check_available(
            || format!("a {w}x{h} image"),
            u64::from(w) * u64::from(h) * 20,
        )
        .map_err(anyhow::Error::from),
    };
    checked.with_context(|| format!("{flag} {w}x{h}"))
}

/// Camera and isosurface values must be finite (and the zoom positive): a NaN would render
/// a blank image that looks like a data problem.
fn check_camera_args(args: &RenderArgs) -> anyhow::Result<()> {
    for (name, v) in [
        ("--yaw", args.yaw),
        ("--pitch", args.pitch),
        ("--zoom", args.zoom),
        ("--step", args.step),
        ("--iso", args.iso),
        ("--path-time", args.path_time.map(|t| t as f32)),
    ] {
        if let Some(v) = v
            && !v.is_finite()
        {
            bail!("{name} {v} is not a finite number");
        }
    }
    if args.zoom.is_some_and(|z| z <= 0.0) {
        bail!("--zoom must be positive (> 1 moves closer)");
    }
    if let Some(p) = args.pitch
        && !Camera::PITCH_DEG.contains(f64::from(p))
    {
        bail!(
            "--pitch {p}: the elevation in degrees must be {}",
            Camera::PITCH_DEG.describe()
        );
    }
    if let Some(s) = args.step
        && !limits::STEP_VOXELS.contains(f64::from(s))
    {
        bail!(
            "--step {s}: the step length in voxels must be {}",
            limits::STEP_VOXELS.describe()
        );
    }
    Ok(())
}

fn parse_frames(s: &str) -> anyhow::Result<std::ops::Range<usize>> {
    if let Some((a, b)) = s.split_once("..=") {
        let end = b.trim().parse::<usize>()?;
        let end = end
            .checked_add(1)
            .with_context(|| format!("frame range {s:?} is too large"))?;
        return Ok(a.trim().parse()?..end);
    }
    if let Some((a, b)) = s.split_once("..") {
        return Ok(a.trim().parse()?..b.trim().parse()?);
    }
    let f: usize = s.trim().parse()?;
    let end = f
        .checked_add(1)
        .with_context(|| format!("frame {s:?} is too large"))?;
    Ok(f..end)
}

fn apply_args(args: &RenderArgs, ls: &mut LoadedScene, aspect: f32) {
    if let Some(t) = args.path_time {
        ls.view.camera = ls.camera_at(t);
    }
    let v = &mut ls.view;
    if let Some(m) = args.mode {
        v.settings.mode = match m {
            ModeArg::Shaded => Mode::Shaded,
            ModeArg::Mip => Mode::Mip,
            ModeArg::Iso => Mode::Isosurface,
            ModeArg::Path => Mode::Path,
        };
    }
    if let Some(iso) = args.iso {
        v.settings.iso_value = iso;
    }
    if args.ortho {
        v.camera.projection = Projection::Orthographic;
    }
    if let Some(y) = args.yaw {
        v.camera.yaw_deg = y;
    }
    if let Some(p) = args.pitch {
        v.camera.pitch_deg = p;
    }
    if args.yaw.is_some() || args.pitch.is_some() || args.ortho {
        let b = v.world_bbox;
        v.camera.fit_to(b, aspect);
    }
    if let Some(z) = args.zoom {
        v.camera.zoom(z);
    }
    if let Some(s) = args.step {
        v.settings.step_voxels = s;
    }
    if args.no_hdda {
        v.settings.hdda = false;
        v.settings.accel = false;
        v.settings.max_step_scale = 1;
    }
    v.settings.shadows &= !args.no_shadows;
    v.settings.ground &= !args.no_ground;
    if let Some(b) = args.max_bounces {
        v.settings.path_max_bounces = b;
    }
}

/// The path-mode flags: valid values, and only in path mode.
fn check_path_args(args: &RenderArgs, mode: Mode) -> anyhow::Result<Option<Stop>> {
    let path = mode == Mode::Path;
    for (flag, given) in [
        ("--spp", args.spp.is_some()),
        ("--time-budget", args.time_budget.is_some()),
        ("--max-bounces", args.max_bounces.is_some()),
        ("--denoise", args.denoise.is_some()),
        ("--converge", args.converge.is_some()),
        ("--converge-json", args.converge_json.is_some()),
    ] {
        if given && !path {
            bail!("{flag} is for the path-traced mode (--mode path)");
        }
    }
    if !path {
        return Ok(None);
    }
    if args.cpu {
        bail!("--cpu: the path-traced mode runs on the GPU only");
    }
    if args.bench {
        bail!("--bench times the ray-marcher; time the path tracer with --converge REF_SPP");
    }
    if let Some(b) = args.max_bounces
        && !limits::PATH_MAX_BOUNCES.contains(f64::from(b))
    {
        bail!(
            "--max-bounces {b}: must be {}",
            limits::PATH_MAX_BOUNCES.describe()
        );
    }
    Ok(Some(match (args.spp, args.time_budget) {
        (Some(0), _) => bail!("--spp must be at least 1"),
        (Some(n), _) => Stop::Samples(n),
        (None, Some(s)) if !(s.is_finite() && s > 0.0) => {
            bail!("--time-budget {s}: must be a positive number of seconds")
        }
        (None, Some(s)) => Stop::Seconds(s),
        (None, None) => Stop::Samples(DEFAULT_SPP),
    }))
}

/// Runs `supercell render`.
/// Reads frame `f` into `slot` under `--read-timeout` (see `super::watchdog`).
fn read_frame(
    args: &RenderArgs,
    ls: &LoadedScene,
    f: usize,
    slot: &mut AlignedBuf,
) -> anyhow::Result<()> {
    let _watched = watchdog::reading(format!("reading frame {f} of {}", args.scene.display()));
    Ok(ls.dataset.read_frame(f, slot, CrcCheck::Skip)?)
}

pub fn run(args: &RenderArgs) -> anyhow::Result<()> {
    check_camera_args(args)?;
    watchdog::install((!args.read_timeout.is_zero()).then_some(args.read_timeout));
    let (w, h) = parse_size(&args.size)?;
    let frames = match &args.frames {
        Some(s) => parse_frames(s)?,
        None => parse_frames(&args.frame.to_string())?,
    };
    let movie_request = args.movie.as_deref().map(|path| movie::MovieRequest {
        path,
        fps: args.fps,
        ffmpeg: args.ffmpeg.as_deref(),
        path_time: args.path_time,
        fixed_camera: args.yaw.is_some()
            || args.pitch.is_some()
            || args.zoom.is_some()
            || args.ortho,
    });
    if args.split.is_some() {
        std::fs::create_dir_all(&args.out).with_context(|| format!("{}", args.out.display()))?;
        return split::run(args, frames);
    }
    let encoder = movie_request.as_ref().map(movie::prepare).transpose()?;
    let scene = super::with_dataset(Scene::load(&args.scene)?)?;
    let with_scene_annotate;
    let args = if scene.overlay.annotate && !args.annotate {
        with_scene_annotate = RenderArgs {
            annotate: true,
            ..args.clone()
        };
        &with_scene_annotate
    } else {
        args
    };
    let mut ls = scene.open(w as f32 / h as f32, args.attributes.as_deref())?;
    ls.dataset.check_whole_grids()?;
    apply_args(args, &mut ls, w as f32 / h as f32);
    for note in ls.suggestion.iter().flat_map(|s| &s.notes) {
        eprintln!("render: {note}");
    }
    let n = ls.dataset.frame_count();
    if frames.is_empty() || frames.end > n {
        bail!("frames {frames:?} are not within the dataset's {n} frames");
    }
    let path_stop = check_path_args(args, ls.view.settings.mode)?;
    if args.bench {
        return bench::bench(args, &mut ls, frames.start);
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("{}", args.out.display()))?;
    if let Some(selection) = &args.gpus {
        return render_on_gpus(args, selection, frames, path_stop);
    }
    if args.cpu {
        return render_on_cpu(args, &ls, frames, (w, h));
    }
    let mut slot = AlignedBuf::new();
    let ctx = GpuContext::headless()?;
    eprintln!(
        "rendering on {}{}",
        ctx.describe(),
        if ctx.caps.software {
            " (a software Vulkan adapter: seconds per frame at large sizes)"
        } else {
            ""
        }
    );
    let mut renderer = open_renderer(&ctx)?;
    check_size("--size", Some(&renderer), w, h)?;
    for f in frames.clone() {
        check_frame_fits(&ls, &renderer, f)?;
        split::check_budget(args, &ls, f)?;
    }
    let mut movie = match (&movie_request, &encoder) {
        (Some(req), Some(enc)) => Some(movie::start(req, enc, &ls, scene.playback.fps, (w, h))?),
        _ => None,
    };
    let bar = progress_bar(
        "render [{elapsed_precise}] {bar:30} {pos}/{len} frames  {msg}",
        frames.len() as u64,
    );
    // A render blocks: the bar keeps ticking meanwhile (seconds per frame on software Vulkan).
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    for (k, f) in frames.enumerate() {
        bar.set_message(format!("frame {f}, {w}x{h}"));
        if let Some(m) = &movie
            && let Some(t) = m.path_time(k)
        {
            ls.view.camera = ls.camera_at(t);
        }
        if let Some(ref_spp) = args.converge {
            read_frame(args, &ls, f, &mut slot)?;
            check_headers(&ls, f, &slot)?;
            let grids = shown_grids(&renderer, &ls, f)?;
            let uploaded = upload_shown(&ctx, &renderer, &slot, &grids)
                .with_context(|| format!("{}: frame {f}", args.scene.display()))?;
            bind_uploaded(&mut renderer, &uploaded, &grids)?;
            let json = args
                .converge_json
                .clone()
                .unwrap_or_else(|| args.out.join("converge.json"));
            let device = ctx.describe();
            return bar.suspend(|| {
                converge(
                    &mut renderer,
                    &ls.view,
                    w,
                    h,
                    ref_spp,
                    device,
                    &args.scene,
                    f,
                    &json,
                )
            });
        }
        let img = render_frame(
            args,
            &ls,
            &ctx,
            &mut renderer,
            &mut slot,
            f,
            path_stop,
            &bar,
            "",
        )?;
        if let Some(m) = movie.as_mut() {
            m.movie.push(&img)?;
        }
    }
    bar.finish_and_clear();
    if let Some(m) = movie {
        let (path, n) = m.movie.finish()?;
        println!("{}", path.display());
        eprintln!("render: {n} frames encoded into {}", path.display());
    }
    Ok(())
}

/// `render --cpu`: every frame with the CPU reference renderer, saying what each cost.
fn render_on_cpu(
    args: &RenderArgs,
    ls: &LoadedScene,
    frames: std::ops::Range<usize>,
    (w, h): (u32, u32),
) -> anyhow::Result<()> {
    let mut slot = AlignedBuf::new();
    check_size("--size", None, w, h)?;
    let bar = progress_bar(
        "render [{elapsed_precise}] {bar:30} {pos}/{len} frames  {msg}",
        frames.len() as u64,
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    for f in frames {
        bar.set_message(format!("frame {f}, {w}x{h} on the CPU"));
        read_frame(args, ls, f, &mut slot)?;
        let grids = cpu_grids(ls, f, &slot)?;
        if let Some(note) = empty_note(ls, f, &slot) {
            bar.suspend(|| eprintln!("render: {note}"));
        }
        let refs: Vec<_> = grids.iter().map(|g| g.as_ref()).collect();
        let t0 = std::time::Instant::now();
        let (img, work) = supercell::render::render_cpu_counted(&refs, &ls.view, w, h);
        bar.suspend(|| {
            eprintln!(
                "frame {f}: CPU render in {:.2} s; march per ray: {:.2} steps, {:.2} \
                 grid samples, {:.2} sun lookups ({} rays)",
                t0.elapsed().as_secs_f64(),
                work.per_ray(work.steps),
                work.per_ray(work.samples),
                work.per_ray(work.sun_lookups),
                work.rays
            );
        });
        bar.suspend(|| save(args, ls, img, f))?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
}

/// Reads frame `f`, renders it (path traced to `path_stop` in path mode) and writes its
/// PNG, saying how long it took (`who`: which GPU, with several); returns the image.
#[allow(clippy::too_many_arguments)]
fn render_frame(
    args: &RenderArgs,
    ls: &LoadedScene,
    ctx: &GpuContext,
    renderer: &mut Renderer,
    slot: &mut AlignedBuf,
    f: usize,
    path_stop: Option<Stop>,
    bar: &indicatif::ProgressBar,
    who: &str,
) -> anyhow::Result<supercell::render::Image> {
    let (w, h) = parse_size(&args.size)?;
    read_frame(args, ls, f, slot)?;
    check_headers(ls, f, slot)?;
    if let Some(note) = empty_note(ls, f, slot) {
        bar.suspend(|| eprintln!("render: {note}"));
    }
    let grids = shown_grids(renderer, ls, f)?;
    let uploaded = upload_shown(ctx, renderer, slot, &grids)
        .with_context(|| format!("{}: frame {f}", args.scene.display()))?;
    bind_uploaded(renderer, &uploaded, &grids)?;
    if let Some(stop) = path_stop {
        let p = refine(renderer, &ls.view, w, h, stop)?;
        if args.denoise != Some(OnOff::Off) {
            show(renderer, true)?;
        }
        let img = renderer.read_image()?;
        bar.suspend(|| {
            eprintln!(
                "frame {f}{who}: {w}x{h} path traced, {} samples per pixel in {:.2} s ({:.1} M \
                 samples/s)",
                p.samples,
                p.seconds,
                p.samples_per_second(w, h) / 1e6
            );
        });
        let img = bar.suspend(|| save(args, ls, img, f))?;
        bar.inc(1);
        return Ok(img);
    }
    let t = renderer.render_timed(&ls.view, w, h)?;
    let img = renderer.read_image()?;
    bar.suspend(|| {
        eprintln!(
            "frame {f}{who}: {w}x{h}{} in {:.2} ms{}",
            if uploaded.parts.len() > 1 && uploaded.uploaded() == uploaded.parts.len() {
                format!(" from {} parts", uploaded.parts.len())
            } else if uploaded.parts.len() > 1 {
                format!(
                    " from {} of the frame's {} parts",
                    uploaded.uploaded(),
                    uploaded.parts.len()
                )
            } else {
                String::new()
            },
            t.wall_ms,
            t.gpu_ms
                .map(|g| format!(" (GPU {g:.2} ms)"))
                .unwrap_or_default()
        );
    });
    let img = bar.suspend(|| save(args, ls, img, f))?;
    bar.inc(1);
    Ok(img)
}

/// `render --gpus`: every GPU named renders the frames it owns (alternate frames, as the
/// player deals them), each with its own device, renderer and dataset reader, at once.
fn render_on_gpus(
    args: &RenderArgs,
    selection: &supercell::bench::jobs::GpuSelection,
    frames: std::ops::Range<usize>,
    path_stop: Option<Stop>,
) -> anyhow::Result<()> {
    let ordinals = super::play::resolve_gpus(selection)?;
    let opened = supercell::app::gpus::open_gpus(&ordinals)?;
    for (k, g) in opened.iter().enumerate() {
        eprintln!("render: GPU {k} (--gpus {}): {}", g.ordinal, g.matched);
    }
    let ownership = supercell::pipeline::multi::Ownership::alternate(opened.len())
        .map_err(anyhow::Error::msg)?;
    let bar = progress_bar(
        "render [{elapsed_precise}] {bar:30} {pos}/{len} frames  {msg}",
        frames.len() as u64,
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    let (w, h) = parse_size(&args.size)?;
    let results: Vec<anyhow::Result<(usize, f64)>> = std::thread::scope(|scope| {
        let workers: Vec<_> = opened
            .iter()
            .enumerate()
            .map(|(k, g)| {
                let ctx = GpuContext {
                    adapter: g.gpu.adapter.clone(),
                    device: g.gpu.device.clone(),
                    queue: g.gpu.queue.clone(),
                    caps: g.gpu.caps.clone(),
                };
                let mine: Vec<usize> = frames
                    .clone()
                    .filter(|&f| ownership.owner(f as u32) == k)
                    .collect();
                let bar = bar.clone();
                scope.spawn(move || -> anyhow::Result<(usize, f64)> {
                    let t0 = std::time::Instant::now();
                    let scene = super::with_dataset(Scene::load(&args.scene)?)?;
                    let mut ls = scene.open(w as f32 / h as f32, args.attributes.as_deref())?;
                    apply_args(args, &mut ls, w as f32 / h as f32);
                    let mut renderer = open_renderer(&ctx)?;
                    check_size("--size", Some(&renderer), w, h)?;
                    for &f in &mine {
                        check_frame_fits(&ls, &renderer, f)?;
                        split::check_budget(args, &ls, f)?;
                    }
                    let mut slot = AlignedBuf::new();
                    let who = format!(" on GPU {k}");
                    for &f in &mine {
                        render_frame(
                            args,
                            &ls,
                            &ctx,
                            &mut renderer,
                            &mut slot,
                            f,
                            path_stop,
                            &bar,
                            &who,
                        )
                        .with_context(|| format!("GPU {k}"))?;
                    }
                    Ok((mine.len(), t0.elapsed().as_secs_f64()))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a GPU's render thread panicked")))
            })
            .collect()
    });
    bar.finish_and_clear();
    let mut total = 0;
    for (k, r) in results.into_iter().enumerate() {
        let (n, secs) = r?;
        total += n;
        eprintln!(
            "render: GPU {k}: {n} frames in {secs:.2} s ({:.2} frames/s)",
            n as f64 / secs.max(1e-9)
        );
    }
    eprintln!("render: {total} frames on {} GPUs", opened.len());
    Ok(())
}

/// Refuses a frame whose grid headers fail the structural check
/// ([`supercell::dataset::check_frame_headers`], as the player's): the GPU renderer would
/// follow whatever offsets a damaged header holds.
fn check_headers(ls: &LoadedScene, f: usize, slot: &[u8]) -> anyhow::Result<()> {
    let m = ls.dataset.manifest();
    let frame = ls
        .dataset
        .frame(f)
        .with_context(|| format!("frame {f} does not exist"))?;
    let mut read = supercell::dataset::read_host_slot(slot);
    supercell::dataset::check_frame_headers(frame, slot.len(), &mut read).map_err(|bad| {
        let name = m
            .attributes
            .get(bad.attribute as usize)
            .map_or("?", |a| a.name.as_str());
        anyhow::anyhow!("frame {f}: {bad} ({name}); not rendered")
    })
}

/// The renderer with this process's settings ([`super::render_config`]): the device's part
/// size, or the one `SUPERCELL_PART_BYTES` forces (small parts make a small frame span
/// several, as a frame over the device's part size does).
fn open_renderer(ctx: &GpuContext) -> anyhow::Result<Renderer> {
    let part_bytes = super::ingest_tuning()?.part_bytes;
    let config = super::render_config()?;
    Ok(Renderer::with_config(
        &ctx.device,
        &ctx.queue,
        ctx.caps.clone(),
        config,
        part_bytes,
    )?)
}

/// Frame `f`'s grids that the render shows (the scene's attributes less those it disables),
/// located in the slot's parts of the renderer's part size, in slot order.
fn shown_grids(
    renderer: &Renderer,
    ls: &LoadedScene,
    f: usize,
) -> anyhow::Result<Vec<Option<GridInParts>>> {
    let mut grids = ls.grids_in_parts(f, renderer.part_bytes())?;
    for (g, a) in grids.iter_mut().zip(&ls.view.attributes) {
        if !a.as_ref().is_some_and(|a| a.enabled) {
            *g = None;
        }
    }
    Ok(grids)
}

/// A frame's parts on the device: the ones its shown grids span, each its own buffer; the
/// others are not uploaded (a frame may hold more parts than the device binds at once).
struct UploadedParts {
    /// Part k of the slot, where a shown grid spans it.
    parts: Vec<Option<wgpu::Buffer>>,
    /// Stands in for the parts left out (no grid bound reads them).
    absent: wgpu::Buffer,
}

impl UploadedParts {
    /// How many parts were uploaded.
    fn uploaded(&self) -> usize {
        self.parts.iter().flatten().count()
    }
}

/// Uploads the parts of `slot` (frame `f`'s image) that `grids` span.
fn upload_shown(
    ctx: &GpuContext,
    renderer: &Renderer,
    slot: &[u8],
    grids: &[Option<GridInParts>],
) -> anyhow::Result<UploadedParts> {
    let part_bytes = renderer.part_bytes();
    let chunk = usize::try_from(part_bytes)?;
    let mut parts: Vec<Option<wgpu::Buffer>> = vec![None; slot.len().div_ceil(chunk).max(1)];
    for k in parts_spanned(grids, part_bytes) {
        let from = k.saturating_mul(chunk).min(slot.len());
        let to = from.saturating_add(chunk).min(slot.len());
        let Some(part) = parts.get_mut(k) else {
            bail!("a grid spans part {k}, past the {}-byte frame", slot.len());
        };
        *part = Some(try_upload_slot(&ctx.device, &ctx.queue, &slot[from..to])?);
    }
    let absent = try_upload_slot(&ctx.device, &ctx.queue, &[0; 4])?;
    Ok(UploadedParts { parts, absent })
}

/// Binds `grids` (frame `f`'s shown grids, [`shown_grids`]) from the parts [`upload_shown`]
/// uploaded (the player binds its slots' parts the same way).
fn bind_uploaded(
    renderer: &mut Renderer,
    uploaded: &UploadedParts,
    grids: &[Option<GridInParts>],
) -> anyhow::Result<()> {
    let part_bytes = renderer.part_bytes();
    let parts: Vec<SlotPart<'_>> = uploaded
        .parts
        .iter()
        .map(|p| match p {
            Some(buffer) => SlotPart {
                buffer,
                offset: 0,
                size: buffer.size().min(part_bytes),
            },
            None => SlotPart {
                buffer: &uploaded.absent,
                offset: 0,
                size: 4,
            },
        })
        .collect();
    renderer.set_frame(&parts, grids)?;
    Ok(())
}

/// Refuses a frame whose shown grids span more parts than the renderer binds
/// ([`Renderer::max_parts`]) before it is read (the manifest says where they lie), naming the
/// attributes and their bytes. A frame larger than that renders where the grids shown fit.
fn check_frame_fits(ls: &LoadedScene, renderer: &Renderer, f: usize) -> anyhow::Result<()> {
    let m = ls.dataset.manifest();
    let capacity = FrameCapacity {
        part_bytes: renderer.part_bytes(),
        max_parts: renderer.max_parts(),
    };
    let shown: Vec<_> = split::shown_entries(ls, f).into_iter().flatten().collect();
    let parts = capacity.parts_for_grids(shown.iter().map(|g| (g.offset, g.size)));
    if parts > capacity.max_parts as u64 {
        let names: Vec<String> = shown
            .iter()
            .map(|g| {
                let name = m
                    .attributes
                    .get(g.attribute as usize)
                    .map_or("?", |a| a.name.as_str());
                format!("{name} {} bytes", g.size)
            })
            .collect();
        bail!(
            "{}: frame {f}: the attributes shown ({}) span {parts} parts of {} bytes; this \
             device binds at most {} parts ({} bytes) for one frame: show fewer attributes \
             (--attributes, or the scene's)",
            m.path().display(),
            names.join(", "),
            capacity.part_bytes,
            capacity.max_parts,
            capacity.max_frame_bytes()
        );
    }
    Ok(())
}

fn cpu_grids<'s>(
    ls: &LoadedScene,
    f: usize,
    slot: &'s [u8],
) -> anyhow::Result<Vec<Option<supercell::format::Grid<'s>>>> {
    ls.slots
        .iter()
        .map(|s| {
            let Some(a) = s else { return Ok(None) };
            let bytes = ls.dataset.grid_bytes(f, *a, slot)?;
            Ok(Some(supercell::format::Grid::parse(bytes)?))
        })
        .collect()
}

/// Which shown attributes have no active voxel in frame `f` (held in `slot`), and where
/// their data starts where the scene's looks were chosen from the data: an empty picture
/// is then said to be the data's, not the renderer's. None where every shown grid has data.
fn empty_note(ls: &LoadedScene, f: usize, slot: &[u8]) -> Option<String> {
    let m = ls.dataset.manifest();
    let mut empty = Vec::new();
    for (a, view) in ls.slots.iter().zip(&ls.view.attributes) {
        let (Some(a), Some(view)) = (*a, view) else {
            continue;
        };
        if !view.enabled {
            continue;
        }
        let active = ls
            .dataset
            .grid_bytes(f, a, slot)
            .ok()
            .and_then(|b| supercell::format::Grid::parse(b).ok())
            .map(|g| g.active_voxel_count());
        if active == Some(0) {
            let name = &m.attributes[a].name;
            let starts = ls
                .suggestion
                .as_ref()
                .and_then(|s| s.sample.first_data.get(a).copied().flatten());
            empty.push(match starts {
                Some(s) => format!("{name} (its data starts at frame {s})"),
                None => name.clone(),
            });
        }
    }
    (!empty.is_empty()).then(|| {
        format!(
            "frame {f}: no data in {} (the picture shows none of it)",
            empty.join(", ")
        )
    })
}

/// Writes frame `f`'s PNG (with the legend where `--annotate` asks for one) and with
/// `--linear` its PFM (never annotated); returns the image as written (what `--movie` adds).
fn save(
    args: &RenderArgs,
    ls: &LoadedScene,
    mut img: supercell::render::Image,
    f: usize,
) -> anyhow::Result<supercell::render::Image> {
    let (out, linear) = (&args.out, args.linear);
    let png = out.join(format!("frame_{f:05}.png"));
    if args.annotate {
        // The legend is drawn on the 8-bit picture only: the linear radiance stays as rendered.
        let legend = Annotation::for_view(&ls.view, &ls.slots, ls.dataset.manifest(), f);
        annotate(&mut img, &legend);
    }
    img.write_png(&png)?;
    println!("{}", png.display());
    if linear {
        let pfm = out.join(format!("frame_{f:05}.pfm"));
        img.write_pfm(&pfm)?;
        println!("{}", pfm.display());
    }
    Ok(img)
}

/// A progress bar of `len` steps on stderr, drawn only where stderr is a terminal.
fn progress_bar(template: &str, len: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use supercell::dataset::{LaneSpec, Provenance};
    use supercell::synth::{Attribute, GenerateOptions, default_params, generate_dataset};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: RenderArgs,
    }

    #[test]
    fn a_pitch_the_camera_cannot_take_is_an_error() {
        let check = |pitch: &str| {
            check_camera_args(&Cli::parse_from(["render", "s.toml", "--pitch", pitch]).args)
                .map_err(|e| e.to_string())
        };
        assert!(check("89").is_ok());
        assert!(check("-89").is_ok());
        let e = check("95").unwrap_err();
        assert_eq!(e, "--pitch 95: the elevation in degrees must be in -89..89");
        assert!(check("-89.5").is_err());
    }

    #[test]
    fn the_scene_iso_value_stands_unless_iso_is_given() {
        let tmp = tempfile::tempdir().unwrap();
        let mut p = default_params();
        p.resolution = 16;
        p.frames = 1;
        p.attributes = vec![Attribute::Cloud];
        generate_dataset(
            &p,
            &GenerateOptions::default(),
            &tmp.path().join("ds"),
            LaneSpec::Count(1),
            1 << 20,
            Provenance::new("render test", Vec::<String>::new()),
            |_| {},
        )
        .unwrap();
        let scene = tmp.path().join("iso.toml");
        std::fs::write(
            &scene,
            "dataset = \"ds\"\n[settings]\nmode = \"iso\"\niso_value = 0.25\n",
        )
        .unwrap();
        let args = |extra: &[&str]| {
            let mut argv = vec!["render", scene.to_str().unwrap()];
            argv.extend_from_slice(extra);
            Cli::parse_from(argv).args
        };
        let mut ls = Scene::load(&scene).unwrap().open(1.0, None).unwrap();
        apply_args(&args(&[]), &mut ls, 1.0);
        assert_eq!(ls.view.settings.iso_value, 0.25, "the scene's value");
        apply_args(&args(&["--mode", "iso"]), &mut ls, 1.0);
        assert_eq!(ls.view.settings.iso_value, 0.25, "--mode iso alone");
        apply_args(&args(&["--iso=-0.5"]), &mut ls, 1.0);
        assert_eq!(ls.view.settings.iso_value, -0.5, "--iso");
    }
}
