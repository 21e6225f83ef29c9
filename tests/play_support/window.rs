//! What the window tests share (tests/play_window.rs, tests/play_window_gpus.rs,
//! tests/mpi_window.rs): running a window to its end, reading its state dumps, checking the
//! order frames were presented in, and comparing a presented picture with a headless render
//! of its frame.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{bin, mean_abs_diff, out_dir, read_png, skip};

/// The flags of a window whose picture is compared with a headless render: rendering at a
/// quarter of the window (software Vulkan on a busy machine takes seconds per full-size
/// frame) with the scene's step and attributes (as `render` uses, not the software ones).
pub const AS_RENDERED: &[&str] = &[
    "--render-scale",
    "0.25",
    "--step",
    "1",
    "--attributes",
    "cloud,rain,wind_speed",
];

/// The flags of the window tests that compare presented pictures with headless renders: a
/// 640 × 480 window [`AS_RENDERED`], 2 reading threads, 20 frames/s, looping.
pub fn compared_window() -> Vec<&'static str> {
    let size = ["--window-size", "640x480"];
    let pace = ["--threads", "2", "--fps", "20", "--mode", "loop"];
    [&size[..], AS_RENDERED, &pace[..]].concat()
}

/// A fresh output folder `name` under [`out_dir`] (what a run before left there is removed).
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = out_dir().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Sets `cmd` to open its window on the X display `display` (not on Wayland), its output
/// piped for [`finish`].
pub fn on_display<'a>(cmd: &'a mut Command, display: &str) -> &'a mut Command {
    cmd.env("DISPLAY", display)
        .env_remove("WAYLAND_DISPLAY")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
}

/// Waits for `child` until `deadline` (past it, kills it and fails, with what it said): its
/// status and what it said, stdout then stderr. Both pipes are drained as it runs, so a
/// talkative child never blocks on a full pipe.
pub fn finish(mut child: Child, deadline: Instant) -> (ExitStatus, String) {
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the window did not end in time: {}{}",
                out.join().unwrap(),
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (status, out.join().unwrap() + &err.join().unwrap())
}

/// Whether the run could not open a window here (said, and the caller passes).
pub fn no_window(status: &ExitStatus, said: &str) -> bool {
    if !status.success() && said.contains("cannot open a window") {
        skip(&format!("no window: {said}"));
        return true;
    }
    false
}

/// Runs `cmd` (a window, set up by [`on_display`]) to its end, at most `limit`: what it
/// said, or `None` where no window can be opened here (after saying so). Fails where the
/// run failed.
pub fn run_window(cmd: &mut Command, limit: Duration) -> Option<String> {
    let child = cmd.spawn().expect("start the window");
    let (status, said) = finish(child, Instant::now() + limit);
    if no_window(&status, &said) {
        return None;
    }
    assert!(status.success(), "{cmd:?} failed:\n{said}");
    Some(said)
}

/// The state dump `name` (written by a script's `dump-state`) in `dir`.
pub fn read_state(dir: &Path, name: &str) -> Value {
    let path = dir.join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("state dump {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The (frame, GPU or rank) pairs a state dump lists as presented, oldest first.
pub fn presented(v: &Value) -> Vec<(u64, u64)> {
    v["gpus"]["presented"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_u64().unwrap(), p[1].as_u64().unwrap()))
        .collect()
}

/// Asserts that `order` (frame, owner) moves one frame at a time through a timeline of
/// `frames` (forward, or backward where `reverse`, wrapping), each frame presented by its
/// owner: frame f by GPU or rank f mod `owners`.
pub fn in_order_from_owners(order: &[(u64, u64)], frames: u64, owners: u64, reverse: bool) {
    let next = |f: u64| {
        if reverse {
            (f + frames - 1) % frames
        } else {
            (f + 1) % frames
        }
    };
    for w in order.windows(2) {
        assert_eq!(w[1].0, next(w[0].0), "out of order: {order:?}");
    }
    for &(f, k) in order {
        assert_eq!(k, f % owners, "frame {f} from {k}: {order:?}");
    }
}

/// A headless render of `frame` of `ds` at `size` (into `dir`/render): its pixels.
pub fn render_frame(ds: &Path, frame: u32, (w, h): (u32, u32), dir: &Path) -> Vec<u8> {
    let rdir = dir.join("render");
    let r = Command::new(bin())
        .args([
            "render",
            ds.to_str().unwrap(),
            "--frame",
            &frame.to_string(),
        ])
        .args([
            "--size",
            &format!("{w}x{h}"),
            "--out",
            rdir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let (rw, rh, pixels) = read_png(&rdir.join(format!("frame_{frame:05}.png")));
    assert_eq!((rw, rh), (w, h));
    pixels
}

/// The size a state dump gives under `key` (`render_size`, `window_size`).
pub fn size_in(state: &Value, key: &str) -> (u32, u32) {
    let v = &state[key];
    (v[0].as_u64().unwrap() as u32, v[1].as_u64().unwrap() as u32)
}

/// The picture the window presented for `frame` (`img.png` in `dir`, written by the
/// script's `render`) is a headless render of that frame (same data, same view) at the
/// render size the state dump `state` gives: the picture's pixels and the render's.
pub fn presented_is_a_render_of(
    ds: &Path,
    dir: &Path,
    state: &Value,
    frame: u32,
) -> (Vec<u8>, Vec<u8>) {
    let size = size_in(state, "render_size");
    let reference = render_frame(ds, frame, size, dir);
    let (iw, ih, img) = read_png(&dir.join("img.png"));
    assert_eq!((iw, ih), size);
    let d = mean_abs_diff(&img, &reference);
    assert!(
        d < 2.0,
        "the picture presented for frame {frame} vs a headless render of it: mean abs diff {d}"
    );
    (img, reference)
}
