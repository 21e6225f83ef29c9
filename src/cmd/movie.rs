//! `render --movie OUT.mp4`: the rendered frames encoded as a video by the system's
//! `ffmpeg` (H.264 through libx264 where that ffmpeg has it, else MPEG-4 Part 2), fed raw
//! RGBA frames on a pipe as they render.
//!
//! The video is written under a temporary name beside `OUT` and renamed when ffmpeg has
//! finished it, so an interrupted or failed run leaves no half-written movie at `OUT`.
//! Without ffmpeg, `--movie` is refused before anything renders, naming the PNG sequence
//! (`--out`) as the way to get the frames.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use anyhow::{Context, bail};
use supercell::render::Image;
use supercell::scene::LoadedScene;

/// The ffmpeg found for a movie and the codec it will use.
#[derive(Clone, Debug)]
pub struct Encoder {
    /// The ffmpeg executable.
    pub ffmpeg: PathBuf,
    /// `libx264` or `mpeg4`.
    pub codec: &'static str,
}

impl Encoder {
    /// Finds ffmpeg (`named`, else on PATH) and the codec it offers; an error naming what
    /// to install where there is none.
    pub fn find(named: Option<&Path>) -> anyhow::Result<Encoder> {
        let ffmpeg = named
            .map(Path::to_path_buf)
            .or_else(|| find_on_path("ffmpeg"))
            .context(
                "--movie encodes with the system's ffmpeg, and none is on PATH (install it, e.g. \
                 `apt install ffmpeg`, or name it with --ffmpeg PATH); --out alone writes the \
                 frames as a PNG sequence",
            )?;
        let out = Command::new(&ffmpeg)
            .args(["-hide_banner", "-encoders"])
            .output()
            .with_context(|| format!("cannot run {}", ffmpeg.display()))?;
        if !out.status.success() {
            bail!("{} -encoders failed ({})", ffmpeg.display(), out.status);
        }
        let list = String::from_utf8_lossy(&out.stdout);
        let codec = if list.contains(" libx264 ") {
            "libx264"
        } else if list.contains(" mpeg4 ") {
            "mpeg4"
        } else {
            bail!(
                "{} offers neither libx264 nor mpeg4 among its encoders",
                ffmpeg.display()
            );
        };
        Ok(Encoder { ffmpeg, codec })
    }

    /// What encodes the movie, for the user: "ffmpeg 6.1.1 (/usr/bin/ffmpeg), H.264 (libx264)".
    pub fn describe(&self) -> String {
        let version = Command::new(&self.ffmpeg)
            .arg("-version")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
            })
            .unwrap_or_else(|| "(version unknown)".into());
        let codec = match self.codec {
            "libx264" => "H.264 (libx264)",
            _ => "MPEG-4 Part 2 (mpeg4; this ffmpeg has no libx264)",
        };
        format!("ffmpeg {version} ({}), {codec}", self.ffmpeg.display())
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Checks `--movie`'s path before anything renders: an `.mp4` name in a folder that exists.
pub fn check_path(path: &Path) -> anyhow::Result<()> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if ext.as_deref() != Some("mp4") {
        bail!(
            "--movie {}: the movie is written as MP4; name it NAME.mp4 (the PNG frames go to --out)",
            path.display()
        );
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        bail!(
            "--movie {}: no such folder {}",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// A movie being written: ffmpeg reading raw frames from a pipe.
pub struct Movie {
    child: Child,
    stdin: Option<ChildStdin>,
    partial: PathBuf,
    path: PathBuf,
    size: (u32, u32),
    frames: u64,
}

impl Movie {
    /// Starts ffmpeg for frames of `width`×`height` at `fps` frames per second into `path`
    /// (through a temporary name beside it). Odd sizes are padded by a pixel (4:2:0 video
    /// needs even ones).
    pub fn start(
        enc: &Encoder,
        path: &Path,
        (width, height): (u32, u32),
        fps: f64,
    ) -> anyhow::Result<Movie> {
        check_path(path)?;
        let name = path.file_name().context("--movie names no file")?;
        let mut partial_name = std::ffi::OsString::from(".");
        partial_name.push(name);
        partial_name.push(".partial");
        let partial = path.with_file_name(partial_name);
        let mut cmd = Command::new(&enc.ffmpeg);
        cmd.args(["-hide_banner", "-loglevel", "error", "-y", "-f", "rawvideo"])
            .args(["-pix_fmt", "rgba", "-s", &format!("{width}x{height}")])
            .args(["-framerate", &format!("{fps}"), "-i", "-"])
            .args([
                "-vf",
                "pad=ceil(iw/2)*2:ceil(ih/2)*2",
                "-pix_fmt",
                "yuv420p",
            ])
            .args(["-c:v", enc.codec]);
        if enc.codec == "libx264" {
            cmd.args(["-crf", "18", "-preset", "medium"]);
        } else {
            cmd.args(["-q:v", "2"]);
        }
        cmd.args(["-movflags", "+faststart", "-f", "mp4"])
            .arg(&partial)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // main() restores SIGPIPE's default so that `| head` ends quietly; an encoder that
        // quits must instead be an error carrying ffmpeg's own message, not a silent exit
        // by signal (seen: exit 141 with no word). Writes to a closed pipe then fail EPIPE.
        // SAFETY: changing one signal's disposition; no handler runs Rust code.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", enc.ffmpeg.display()))?;
        let stdin = child.stdin.take();
        Ok(Movie {
            child,
            stdin,
            partial,
            path: path.to_path_buf(),
            size: (width, height),
            frames: 0,
        })
    }

    /// Appends one frame (its tone-mapped sRGB pixels).
    pub fn push(&mut self, img: &Image) -> anyhow::Result<()> {
        if (img.width, img.height) != self.size {
            bail!(
                "movie frame {}: {}x{} where the movie is {}x{}",
                self.frames,
                img.width,
                img.height,
                self.size.0,
                self.size.1
            );
        }
        let stdin = self.stdin.as_mut().context("the movie is finished")?;
        if let Err(e) = stdin.write_all(&img.rgba8) {
            // ffmpeg quit: its own message says why.
            let why = self.stop();
            bail!("ffmpeg stopped taking frames ({e}): {why}");
        }
        self.frames += 1;
        Ok(())
    }

    /// Closes the pipe, waits for ffmpeg and moves the finished movie to its name.
    pub fn finish(mut self) -> anyhow::Result<(PathBuf, u64)> {
        drop(self.stdin.take());
        let mut stderr = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
        }
        let status = self.child.wait().context("waiting for ffmpeg")?;
        if !status.success() || self.frames == 0 {
            let _ = std::fs::remove_file(&self.partial);
            bail!(
                "ffmpeg failed to write {} ({status}, {} frames): {}",
                self.path.display(),
                self.frames,
                stderr.trim()
            );
        }
        std::fs::rename(&self.partial, &self.path).with_context(|| {
            format!(
                "moving {} to {}",
                self.partial.display(),
                self.path.display()
            )
        })?;
        Ok((self.path.clone(), self.frames))
    }

    /// Stops ffmpeg after a failure, removes the partial file and returns what ffmpeg said.
    fn stop(&mut self) -> String {
        drop(self.stdin.take());
        let mut stderr = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.partial);
        stderr.trim().to_string()
    }
}

impl Drop for Movie {
    /// A movie dropped unfinished (an error while rendering) leaves no file behind.
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            self.stop();
        }
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
    Encoder::find(req.ffmpeg)
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
