//! Movies encoded by the system's `ffmpeg` (H.264 through libx264 where that ffmpeg has it,
//! else MPEG-4 Part 2), fed raw RGBA frames on a pipe as they come: `render --movie` and the
//! window's recorder (Shift+R) share this encoder.
//!
//! The video is written under a temporary name beside its path and renamed when ffmpeg has
//! finished it, so an interrupted or failed run leaves no half-written movie there. An
//! encoder that quits is an error carrying ffmpeg's own message.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::render::Image;

/// What can go wrong finding ffmpeg or writing a movie.
#[derive(Debug, thiserror::Error)]
pub enum MovieError {
    /// No ffmpeg named and none on the search path.
    #[error("no ffmpeg on PATH (install it, e.g. `apt install ffmpeg`)")]
    NoFfmpeg,
    /// ffmpeg could not be run, or offers no usable encoder.
    #[error("{0}")]
    Encoder(String),
    /// The movie's path is not an `.mp4` name in a folder that exists.
    #[error("{path}: {why}")]
    Path {
        /// The path asked for.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A frame of another size than the movie's.
    #[error("movie frame {frame}: {got_w}x{got_h} where the movie is {w}x{h}")]
    FrameSize {
        /// The frame's index in the movie.
        frame: u64,
        /// Its width.
        got_w: u32,
        /// Its height.
        got_h: u32,
        /// The movie's width.
        w: u32,
        /// The movie's height.
        h: u32,
    },
    /// ffmpeg stopped or failed: what it said.
    #[error("{0}")]
    Failed(String),
}

/// The ffmpeg found for a movie and the codec it will use.
#[derive(Clone, Debug)]
pub struct Encoder {
    /// The ffmpeg executable.
    pub ffmpeg: PathBuf,
    /// `libx264` or `mpeg4`.
    pub codec: &'static str,
}

impl Encoder {
    /// Finds ffmpeg (`named`, else `ffmpeg` in the folders of `search_path`, a `PATH`-style
    /// list the caller reads) and the codec it offers.
    pub fn find(named: Option<&Path>, search_path: Option<&OsStr>) -> Result<Encoder, MovieError> {
        let ffmpeg = named
            .map(Path::to_path_buf)
            .or_else(|| find_in(search_path?, "ffmpeg"))
            .ok_or(MovieError::NoFfmpeg)?;
        let out = Command::new(&ffmpeg)
            .args(["-hide_banner", "-encoders"])
            .output()
            .map_err(|e| MovieError::Encoder(format!("cannot run {}: {e}", ffmpeg.display())))?;
        if !out.status.success() {
            return Err(MovieError::Encoder(format!(
                "{} -encoders failed ({})",
                ffmpeg.display(),
                out.status
            )));
        }
        let list = String::from_utf8_lossy(&out.stdout);
        let codec = if list.contains(" libx264 ") {
            "libx264"
        } else if list.contains(" mpeg4 ") {
            "mpeg4"
        } else {
            return Err(MovieError::Encoder(format!(
                "{} offers neither libx264 nor mpeg4 among its encoders",
                ffmpeg.display()
            )));
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

/// The first file called `name` in the folders of a `PATH`-style list (the binaries pass
/// their `PATH`: the library reads no environment).
pub fn find_in(search_path: &OsStr, name: &str) -> Option<PathBuf> {
    std::env::split_paths(search_path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Checks a movie's path before anything is encoded: an `.mp4` name in a folder that
/// exists.
pub fn check_path(path: &Path) -> Result<(), MovieError> {
    let bad = |why: String| MovieError::Path {
        path: path.to_path_buf(),
        why,
    };
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if ext.as_deref() != Some("mp4") {
        return Err(bad("the movie is written as MP4; name it NAME.mp4".into()));
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(bad(format!("no such folder {}", dir.display())));
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
    ) -> Result<Movie, MovieError> {
        check_path(path)?;
        let name = path.file_name().ok_or_else(|| MovieError::Path {
            path: path.to_path_buf(),
            why: "names no file".into(),
        })?;
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
        // The binary restores SIGPIPE's default so that `| head` ends quietly; an encoder
        // that quits must instead be an error carrying ffmpeg's own message, not a silent
        // exit by signal (seen: exit 141 with no word). Writes to a closed pipe then fail
        // EPIPE.
        // SAFETY: changing one signal's disposition; no handler runs Rust code.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
        let mut child = cmd.spawn().map_err(|e| {
            MovieError::Encoder(format!("cannot start {}: {e}", enc.ffmpeg.display()))
        })?;
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

    /// The movie's path (where it lands when finished).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its frame size, pixels.
    pub fn size(&self) -> (u32, u32) {
        self.size
    }

    /// Frames taken so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Appends one frame (its tone-mapped sRGB pixels).
    pub fn push(&mut self, img: &Image) -> Result<(), MovieError> {
        if (img.width, img.height) != self.size {
            return Err(MovieError::FrameSize {
                frame: self.frames,
                got_w: img.width,
                got_h: img.height,
                w: self.size.0,
                h: self.size.1,
            });
        }
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(MovieError::Failed("the movie is finished".into()));
        };
        if let Err(e) = stdin.write_all(&img.rgba8) {
            // ffmpeg quit: its own message says why.
            let why = self.stop();
            return Err(MovieError::Failed(format!(
                "ffmpeg stopped taking frames ({e}): {why}"
            )));
        }
        self.frames += 1;
        Ok(())
    }

    /// Closes the pipe, waits for ffmpeg and moves the finished movie to its name; the path
    /// and the frames written.
    pub fn finish(mut self) -> Result<(PathBuf, u64), MovieError> {
        drop(self.stdin.take());
        let mut stderr = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
        }
        let status = self
            .child
            .wait()
            .map_err(|e| MovieError::Failed(format!("waiting for ffmpeg: {e}")))?;
        if !status.success() || self.frames == 0 {
            let _ = std::fs::remove_file(&self.partial);
            return Err(MovieError::Failed(format!(
                "ffmpeg failed to write {} ({status}, {} frames): {}",
                self.path.display(),
                self.frames,
                stderr.trim()
            )));
        }
        std::fs::rename(&self.partial, &self.path).map_err(|e| {
            MovieError::Failed(format!(
                "moving {} to {}: {e}",
                self.partial.display(),
                self.path.display()
            ))
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
