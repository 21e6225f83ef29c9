//! `render --movie OUT.mp4`: the rendered frames encoded as a video by the system's
//! `ffmpeg` through the library's encoder ([`supercell::app::movie`], which the window's
//! recorder uses too), fed raw RGBA frames on a pipe as they render.
//!
//! Without ffmpeg, `--movie` is refused before anything renders, naming the PNG sequence
//! (`--out`) as the way to get the frames.

use std::path::Path;

use anyhow::bail;
use supercell::app::movie::{Encoder, Movie, MovieError};
use supercell::scene::LoadedScene;

/// Finds ffmpeg (`named`, else on PATH) and the codec it offers; an error naming what to
/// install where there is none.
fn find_encoder(named: Option<&Path>) -> anyhow::Result<Encoder> {
    match Encoder::find(named, std::env::var_os("PATH").as_deref()) {
        Ok(e) => Ok(e),
        Err(MovieError::NoFfmpeg) => bail!(
            "--movie encodes with the system's ffmpeg, and none is on PATH (install it, e.g. \
             `apt install ffmpeg`, or name it with --ffmpeg PATH); --out alone writes the \
             frames as a PNG sequence"
        ),
        Err(e) => Err(e.into()),
    }
}

/// Checks `--movie`'s path before anything renders: an `.mp4` name in a folder that exists.
pub fn check_path(path: &Path) -> anyhow::Result<()> {
    match supercell::app::movie::check_path(path) {
        Ok(()) => Ok(()),
        Err(MovieError::Path { path, why }) if why.contains("MP4") => bail!(
            "--movie {}: {why} (the PNG frames go to --out)",
            path.display()
        ),
        Err(e) => bail!("--movie {e}"),
    }
}

/// `--movie`: the video being written and how its camera moves.
pub struct MovieRun {
    /// The encoder's pipe.
    pub movie: Movie,
    /// The camera path's start time and the video's frame rate, where the camera flies the
    /// scene's path; `None` where it stays fixed.
    flight: Option<(f64, f64)>,
}

impl MovieRun {
    /// The camera-path time of movie frame `k`, where the camera flies.
    pub fn path_time(&self, k: usize) -> Option<f64> {
        self.flight.map(|(start, fps)| path_time(start, k, fps))
    }
}

/// What `render --movie` asks for, from its flags.
#[derive(Clone, Copy, Debug)]
pub struct MovieRequest<'a> {
    /// `--movie`: the video's path.
    pub path: &'a Path,
    /// `--fps`; `None`: the scene's playback rate.
    pub fps: Option<f64>,
    /// `--ffmpeg`; `None`: `ffmpeg` on PATH.
    pub ffmpeg: Option<&'a Path>,
    /// `--path-time`: where on the camera path the video starts (default 0).
    pub path_time: Option<f64>,
    /// Whether `--yaw`, `--pitch`, `--zoom` or `--ortho` fix the camera.
    pub fixed_camera: bool,
}

/// Checks the request and finds the encoder, before the scene opens or anything renders.
pub fn prepare(req: &MovieRequest<'_>) -> anyhow::Result<Encoder> {
    if let Some(fps) = req.fps
        && !(fps.is_finite() && (0.1..=240.0).contains(&fps))
    {
        bail!("--fps {fps}: must be between 0.1 and 240 frames per second");
    }
    check_path(req.path)?;
    find_encoder(req.ffmpeg)
}

/// Starts the encoder [`prepare`] found and says what encodes the movie and how the camera
/// moves.
pub fn start(
    req: &MovieRequest<'_>,
    enc: &Encoder,
    ls: &LoadedScene,
    scene_fps: f64,
    size: (u32, u32),
) -> anyhow::Result<MovieRun> {
    let fps = req.fps.unwrap_or(scene_fps);
    let flight = (ls.camera_path.is_some() && !req.fixed_camera)
        .then(|| (req.path_time.unwrap_or(0.0), fps));
    eprintln!(
        "render: movie {} at {fps} frames/s by {}; camera {}",
        req.path.display(),
        enc.describe(),
        match (flight, ls.camera_path.is_some()) {
            (Some(_), _) => "on the scene's camera path",
            (None, true) => "fixed by --yaw/--pitch/--zoom/--ortho",
            (None, false) => "fixed (the scene has no camera path)",
        }
    );
    let movie = Movie::start(enc, req.path, size, fps)?;
    Ok(MovieRun { movie, flight })
}

/// The camera-path time of movie frame `k` at `fps`, starting at `start_s`.
pub fn path_time(start_s: f64, k: usize, fps: f64) -> f64 {
    start_s + k as f64 / fps
}
