//! The window's recorder (Shift+R, `record FILE` / `record stop`): what the window shows,
//! the image and the overlay as a screenshot composes them, piped to ffmpeg through the
//! encoder `render --movie` uses ([`crate::app::movie`]).
//!
//! The movie has the window's size when recording started (ffmpeg pads an odd side by a
//! pixel: 4:2:0 video needs even ones) and plays in real time at a fixed rate: each
//! composed picture stands for the movie frames due since the one before (a window that
//! composes slower than the movie's rate repeats its pictures; one that composes faster
//! gives some up). A window resized while recording ends the movie there.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::super::movie::{Encoder, Movie};
use super::super::overlay::UiState;
use crate::render::Image;

/// Where the window's movies go and which ffmpeg writes them.
#[derive(Clone, Debug, Default)]
pub struct RecordOptions {
    /// The folder of movies named by the time they start (Shift+R):
    /// `supercell-YYYYMMDD-HHMMSS.mp4`, UTC. `None`: the current folder.
    pub dir: Option<PathBuf>,
    /// The ffmpeg to encode with, as the binary found it on PATH; `None`: there is none, and
    /// recording says so.
    pub ffmpeg: Option<PathBuf>,
}

/// Movie frames one composed picture may stand for at most (a stalled window's movie
/// skips the stall's length beyond this rather than repeat a picture for minutes).
const MAX_REPEAT: u64 = 60;

/// A recording, or none.
pub(super) struct Recorder {
    opts: RecordOptions,
    /// Frames per second of the movies.
    fps: f64,
    movie: Option<(Movie, Instant)>,
}

impl Recorder {
    /// A recorder for movies at `fps` frames per second.
    pub(super) fn new(opts: RecordOptions, fps: f64) -> Recorder {
        Recorder {
            opts,
            fps,
            movie: None,
        }
    }

    /// Whether a movie is being written (the next composition is read back for it).
    pub(super) fn active(&self) -> bool {
        self.movie.is_some()
    }

    /// Shift+R (`what` = `None`): starts a movie named by the time, or stops the one being
    /// written; the script's `record FILE` (`Some(Some(FILE))`) starts one there and its
    /// `record stop` (`Some(None)`) stops. Movies have the window's `size`. What to tell the
    /// user.
    pub(super) fn apply(
        &mut self,
        what: Option<Option<PathBuf>>,
        size: (u32, u32),
        ui: &mut UiState,
    ) -> String {
        match what {
            None if self.active() => self.stop(ui),
            None => self.start(None, size, ui),
            Some(None) => self.stop(ui),
            Some(Some(path)) => self.start(Some(path), size, ui),
        }
    }

    /// Starts a movie of `size` pixels at `path` (default: named by the time, in the
    /// recording folder); what to tell the user.
    fn start(&mut self, path: Option<PathBuf>, size: (u32, u32), ui: &mut UiState) -> String {
        if let Some((m, _)) = &self.movie {
            return format!("already recording {}", m.path().display());
        }
        let Some(ffmpeg) = self.opts.ffmpeg.clone() else {
            return "cannot record: no ffmpeg on PATH (install it, e.g. `apt install ffmpeg`)"
                .into();
        };
        let path = path.unwrap_or_else(|| {
            let dir = self.opts.dir.clone().unwrap_or_else(|| PathBuf::from("."));
            dir.join(default_name(std::time::SystemTime::now()))
        });
        let started = Encoder::find(Some(&ffmpeg), None)
            .and_then(|enc| Movie::start(&enc, &path, size, self.fps).map(|m| (m, enc)));
        match started {
            Ok((movie, enc)) => {
                ui.recording.active = Some((path.display().to_string(), 0));
                self.movie = Some((movie, Instant::now()));
                format!(
                    "recording {} ({}x{}{}, {} frames/s) by {}; Shift+R stops",
                    path.display(),
                    size.0,
                    size.1,
                    even_note(size),
                    self.fps,
                    enc.describe()
                )
            }
            Err(e) => format!("cannot record {}: {e}", path.display()),
        }
    }

    /// Stops and finishes the movie; what to tell the user.
    pub(super) fn stop(&mut self, ui: &mut UiState) -> String {
        let Some((movie, _)) = self.movie.take() else {
            return "not recording".into();
        };
        ui.recording.active = None;
        let size = movie.size();
        match movie.finish() {
            Ok((path, frames)) => {
                ui.recording.last = Some((path.display().to_string(), frames, [size.0, size.1]));
                format!("recorded {frames} frames to {}", path.display())
            }
            Err(e) => format!("recording failed: {e}"),
        }
    }

    /// Adds the composed picture `img` for the movie frames due by now; a message where the
    /// recording ended (a resized window, ffmpeg quitting).
    pub(super) fn push(&mut self, img: &Image, ui: &mut UiState) -> Option<String> {
        let (movie, start) = self.movie.as_mut()?;
        if (img.width, img.height) != movie.size() {
            let said = self.stop(ui);
            return Some(format!("the window was resized: {said}"));
        }
        let due = (start.elapsed().as_secs_f64() * self.fps).floor() as u64 + 1;
        let mut behind = due.saturating_sub(movie.frames());
        if behind > MAX_REPEAT {
            // A stall: the movie skips it, this picture is its next frame, and the clock
            // restarts to agree.
            let taken = Duration::from_secs_f64(movie.frames() as f64 / self.fps);
            *start = Instant::now()
                .checked_sub(taken)
                .unwrap_or_else(Instant::now);
            behind = 1;
        }
        for _ in 0..behind {
            if let Err(e) = movie.push(img) {
                self.movie = None;
                ui.recording.active = None;
                return Some(format!("recording failed: {e}"));
            }
        }
        ui.recording.active = Some((movie.path().display().to_string(), movie.frames()));
        None
    }
}

/// `supercell-YYYYMMDD-HHMMSS.mp4` for a moment (UTC).
fn default_name(at: std::time::SystemTime) -> String {
    let secs = at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // "2026-12-05T13:04:05Z" → "20261205-130405".
    let iso = super::super::headless::iso8601(secs);
    let digits: String = iso.chars().filter(char::is_ascii_digit).collect();
    format!("supercell-{}-{}.mp4", &digits[..8], &digits[8..14])
}

/// Says that an odd side is padded.
fn even_note((w, h): (u32, u32)) -> &'static str {
    if w % 2 == 1 || h % 2 == 1 {
        ", padded to even sides"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn movies_are_named_by_the_utc_time_they_start() {
        let at = std::time::UNIX_EPOCH + Duration::from_secs(1_796_012_656);
        assert_eq!(default_name(at), "supercell-20261130-042416.mp4");
        assert_eq!(even_note((641, 360)), ", padded to even sides");
        assert_eq!(even_note((640, 360)), "");
    }
}
