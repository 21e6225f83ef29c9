//! The player's window across MPI ranks (cargo feature `mpi`, Open MPI): `mpirun -n 2
//! supercell play` under an Xvfb of the test's own, rank 0 showing the window (DISPLAY
//! exported with `mpirun -x`), rank 1 serving its player. A script checks frames presented
//! strictly in order by both ranks, the overlay's row per rank ("rank k on HOST", the
//! picture transfer in the copy column), the path toggle reaching rank 1 (a loopback path
//! stands in for the direct path where no CUDA is), an exact jump to a frame of rank 1 whose
//! picture is a render of that frame, a camera change reaching rank 1, and every rank
//! exiting 0 after `quit`. A rank that stops answering (SIGSTOP) is said on screen and ends
//! the run non-zero, naming it, within the timeout; a rank 0 that stops taking rank 1's
//! pictures is named by rank 1 once its posted picture's deadline passes.
//!
//! Runs where the feature is built and `mpirun` is installed (scripts/test.sh runs it with
//! `--features mpi`); without mpirun, a GPU adapter or Xvfb it says why and passes, unless
//! SUPERCELL_REQUIRE_CROSSCHECK / SUPERCELL_REQUIRE_GPU is set (CI), where it fails.
#![cfg(feature = "mpi")]

mod mpi_support;
mod play_support;
mod storm_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use mpi_support::{have_mpirun, launch_exporting, rank_pid};
use play_support::window::{
    compared_window, finish, fresh_dir, in_order_from_owners, no_window, on_display, presented,
    presented_is_a_render_of, read_state, run_window,
};
use play_support::{Display, bin, dataset, gpu, mean_abs_diff, own_xvfb, read_png, skip};
use serde_json::Value;

/// `mpirun -x DISPLAY -n 2 supercell play DATASET FLAGS` (the window) on `display`, with
/// `script` and the rank timeout `timeout`, its output piped.
fn window(ds: &Path, display: &str, flags: &[&str], script: &str, timeout: &str) -> Command {
    let mut cmd = launch_exporting(
        Some(2),
        bin(),
        "supercell-mpi-window-xdg",
        &["DISPLAY", "XDG_RUNTIME_DIR"],
    );
    cmd.args(["play", ds.to_str().unwrap()]).args(flags).args([
        "--timeout",
        timeout,
        "--script",
        script,
    ]);
    on_display(&mut cmd, display);
    cmd
}

/// What a window test across ranks needs: mpirun, a GPU adapter and an Xvfb of its own
/// (`None`, said, where one is missing), the small storm, and a fresh output folder `name`.
fn window_set_up(name: &str) -> Option<(Display, PathBuf, PathBuf)> {
    if !have_mpirun() || gpu().is_none() {
        return None;
    }
    let Some(x) = own_xvfb(1024, 768) else {
        skip("no Xvfb");
        return None;
    };
    Some((x, dataset(), fresh_dir(name)))
}

/// The window flags of the tests that compare pictures, on the host path with a loopback
/// direct path.
fn compared_across_ranks() -> Vec<&'static str> {
    [
        compared_window(),
        vec!["--path", "host", "--loopback-direct"],
    ]
    .concat()
}

#[test]
fn window_across_two_ranks_plays_in_order_and_reaches_rank_1() {
    let Some((x, ds, dir)) = window_set_up("mpi-window") else {
        return;
    };
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    // Frame 5 belongs to rank 1 of two (alternate frames).
    let script = format!(
        "wait-frames 6; dump-state {s1}; key D; wait-frames 4; wait 500ms; dump-state {s2}; \
         key Space; scrub 5; wait-shown 5; wait 200ms; render {img}; dump-state {s3}; key a; \
         key a; wait-frames 1; wait 200ms; render {img2}; dump-state {s4}; quit",
        s1 = p("s1.json"),
        s2 = p("s2.json"),
        s3 = p("s3.json"),
        s4 = p("s4.json"),
        img = p("img.png"),
        img2 = p("img2.png"),
    );
    let started = Instant::now();
    let mut cmd = window(&ds, &x.name, &compared_across_ranks(), &script, "60s");
    // Every rank exited 0 (mpirun says otherwise).
    if run_window(&mut cmd, Duration::from_secs(400)).is_none() {
        return;
    }
    let read = |n: &str| read_state(&dir, n);

    let s1 = read("s1.json");
    in_order_with_a_row_per_rank(&s1);

    // The toggle reached rank 1: its own player reads on the (loopback) direct path now.
    let s2 = read("s2.json");
    assert_eq!(s2["active_path"], "direct", "{s2}");
    let rank1 = &s2["gpus"]["rows"][1];
    assert_eq!(rank1["path_label"], "loopback (test)", "{rank1}");
    assert!(
        rank1["path_frames"].as_u64().unwrap() >= 1,
        "rank 1 took in no frame on the direct path: {rank1}"
    );

    // The jump landed exactly on frame 5, paused, from rank 1; the picture is frame 5's.
    let s3 = read("s3.json");
    assert_eq!(s3["shown_frame"], 5, "{s3}");
    assert_eq!(s3["playing"], false);
    assert_eq!(presented(&s3).last(), Some(&(5, 1)), "{s3}");
    let (img, _) = presented_is_a_render_of(&ds, &dir, &s3, 5);

    // The camera turned: rank 1 rendered frame 5 again for the new view.
    let s4 = read("s4.json");
    assert_eq!(s4["shown_frame"], 5, "{s4}");
    assert_eq!(presented(&s4).last(), Some(&(5, 1)), "{s4}");
    assert!(
        s4["frames_shown"].as_u64().unwrap() > s3["frames_shown"].as_u64().unwrap(),
        "not presented again after the camera turned: {s4}"
    );
    let (_, _, img2) = read_png(&dir.join("img2.png"));
    let moved = mean_abs_diff(&img2, &img);
    assert!(moved > 1.0, "rank 1's picture did not change: {moved}");
    eprintln!(
        "window across 2 ranks: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Playing: frames presented one after another in order, each from the rank that owns it
/// (frame f from rank f mod 2); a row per rank naming it and its host, rank 1's pictures'
/// transfer timed in the copy column.
fn in_order_with_a_row_per_rank(s1: &Value) {
    assert!(s1["frames_shown"].as_u64().unwrap() >= 6, "{s1}");
    assert_eq!(s1["frame_count"], 8);
    let order = presented(s1);
    assert!(order.len() >= 6, "{order:?}");
    in_order_from_owners(&order, 8, 2, false);
    let rows = s1["gpus"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{s1}");
    for (k, r) in rows.iter().enumerate() {
        assert_eq!(r["gpu"], k as u64);
        assert_eq!(r["rank"], k as u64, "{r}");
        assert!(!r["host"].as_str().unwrap().is_empty(), "{r}");
        assert!(r["frames_shown"].as_u64().unwrap() >= 1, "{r}");
        assert!(r["path_frames"].as_u64().unwrap() >= 1, "{r}");
    }
    assert!(rows[0]["copy_ms"].is_null(), "{s1}");
    assert!(rows[1]["copy_ms"].as_f64().unwrap() > 0.0, "{s1}");
    let host = rows[1]["host"].as_str().unwrap();
    let lines: Vec<String> = serde_json::from_value(s1["lines"].clone()).unwrap();
    let short: String = host.split('.').next().unwrap().chars().take(11).collect();
    for k in 0..2 {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("rank {k} on {short}"))),
            "{lines:?}"
        );
    }
    assert!(lines.iter().any(|l| l.contains("xfer ")), "{lines:?}");
    assert!(
        lines.iter().any(|l| l.contains("2 ranks")),
        "the header: {lines:?}"
    );
    assert_eq!(s1["active_path"], "host");
}

/// The kiosk across ranks: its camera flies every tick (a new view each tick, reaching
/// rank 1), yet playback goes on in order from both ranks; `--exit-after` ends every rank
/// with 0.
#[test]
fn kiosk_across_ranks_plays_on_while_flying_and_exit_after_ends_every_rank() {
    let Some((x, ds, dir)) = window_set_up("mpi-window-kiosk") else {
        return;
    };
    let state = dir.join("state.json");
    let script = format!("wait-frames 10; dump-state {}", state.display());
    let kiosk = ["--kiosk", "--exit-after", "12", "--window-size", "640x480"];
    let flags = [&kiosk[..], &["--render-scale", "0.25", "--threads", "2"]].concat();
    let mut cmd = window(&ds, &x.name, &flags, &script, "60s");
    if run_window(&mut cmd, Duration::from_secs(200)).is_none() {
        return;
    }
    let order = presented(&read_state(&dir, "state.json"));
    assert!(order.len() >= 10, "{order:?}");
    in_order_from_owners(&order, 8, 2, false);
}

#[test]
fn a_rank_that_stops_answering_is_said_and_ends_the_window_run() {
    let Some((x, ds, dir)) = window_set_up("mpi-window-silent") else {
        return;
    };
    let s1 = dir.join("s1.json");
    let later = |i: usize| dir.join(format!("later{i:02}.json"));
    // Rank 1 is stopped once s1 is written; the window dumps its state every 300 ms after
    // for 30 s (the timeout is 20 s, longer than rank 1 is busy with one frame, or rank 0
    // builds its pipelines taking no picture, on a loaded software adapter; the window says
    // it for 3 s before the run ends).
    let dumps: Vec<String> = (0..100)
        .map(|i| format!("wait 300ms; dump-state {}", later(i).display()))
        .collect();
    let script = format!(
        "wait-frames 2; dump-state {}; {}; wait 120s; quit",
        s1.display(),
        dumps.join("; ")
    );
    let started = Instant::now();
    let Some((child, stopped)) = stop_rank_once_written(&ds, &x.name, &script, &s1, (1, "20s"))
    else {
        return;
    };
    let (status, said) = finish(child, started + Duration::from_secs(300));
    if no_window(&status, &said) {
        return;
    }
    let ended = stopped.at.elapsed();
    assert!(!status.success(), "{said}");
    assert!(
        said.contains("rank 1 did not answer within 20.0 s"),
        "{said}"
    );
    // Not before rank 1 was stopped.
    let before = std::fs::read_to_string(&s1).unwrap();
    assert!(!before.contains("did not answer"), "{before}");
    // The timeout, the 3 s the window shows it, and the slack of a loaded 2-core machine;
    // far from the script's 120 s wait.
    assert!(ended < Duration::from_secs(55), "{ended:?}: {said}");
    eprintln!(
        "rank 1 stopped: the run ended {:.1} s later",
        ended.as_secs_f64()
    );
    // Said on screen before the run ended.
    let said_on_screen = (0..100)
        .filter_map(|i| std::fs::read_to_string(later(i)).ok())
        .any(|t| {
            let v: Value = serde_json::from_str(&t).unwrap();
            let m = v["message"].as_str().unwrap_or_default();
            m.contains("rank 1 did not answer") && m.contains("ending the run")
        });
    assert!(said_on_screen, "not said on screen: {said}");
}

/// A rank of a run stopped (SIGSTOP, as on a hung node) by a test: killed when the test
/// ends where it is still there (a run that hung), so no stopped process outlives it.
struct Stopped {
    /// A path only its run's command line holds (its script's state dump).
    own: PathBuf,
    rank: u32,
    pid: u32,
    at: Instant,
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if rank_pid(&self.own, "play", self.rank) == Some(self.pid) {
            let _ = Command::new("kill")
                .args(["-KILL", &self.pid.to_string()])
                .status();
        }
    }
}

/// Starts the window across 2 ranks on `ds` (pictures compared, the rank timeout
/// `timeout`) on `display` with `script`, and stops `rank` once the script's state dump `dump` is
/// written (a few frames shown): the run and its stopped rank. `None` where the run ended
/// first because it could not open a window here (said); fails where it ended otherwise,
/// or showed nothing within 200 s.
fn stop_rank_once_written(
    ds: &Path,
    display: &str,
    script: &str,
    dump: &Path,
    (rank, timeout): (u32, &str),
) -> Option<(Child, Stopped)> {
    let started = Instant::now();
    let mut child = window(ds, display, &compared_across_ranks(), script, timeout)
        .spawn()
        .expect("start mpirun");
    loop {
        if dump.exists() {
            // Found by the dump's path, in its script: the tests of this binary run at once
            // on one dataset.
            let Some(pid) = rank_pid(dump, "play", rank) else {
                let (_, said) = finish(child, Instant::now() + Duration::from_secs(30));
                panic!(
                    "rank {rank} had ended once {} was written: {said}",
                    dump.display()
                );
            };
            let stop = Command::new("kill")
                .args(["-STOP", &pid.to_string()])
                .status()
                .unwrap();
            assert!(stop.success());
            let at = Instant::now();
            let own = dump.to_path_buf();
            return Some((child, Stopped { own, rank, pid, at }));
        }
        if child.try_wait().unwrap().is_some() || started.elapsed() > Duration::from_secs(200) {
            let (status, said) = finish(child, Instant::now());
            if no_window(&status, &said) {
                return None;
            }
            panic!("no frames shown (within 200 s): {said}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Rank 0 (the window) stops (SIGSTOP) while rank 1 renders for it: rank 1 drives the
/// picture it posted (`MPI_Isend`; 160 × 120 pixels are over Open MPI's 4 KiB eager limit,
/// so the send completes only once rank 0 takes it) for at most the timeout, then names
/// rank 0 and ends the run non-zero: within the timeout of the stop, not twice it (what a
/// rank with nothing posted waits for a silent rank 0) and never a hang.
#[test]
fn rank_0_that_stops_taking_pictures_is_named_by_rank_1_within_the_timeout() {
    let Some((x, ds, dir)) = window_set_up("mpi-window-rank-0-stopped") else {
        return;
    };
    let s1 = dir.join("s1.json");
    // Stopped as a jump (while playing) lands: rank 1 then renders the frames after it
    // (frame 5's shown, 7 is under way), so it posts a picture after the stop. Stopped
    // while it waited on rank 0 with nothing posted, it would name rank 0 only after twice
    // the timeout.
    let script = format!(
        "wait-frames 4; scrub 5; wait-shown 5; dump-state {}; wait 120s; quit",
        s1.display()
    );
    let Some((child, stopped)) = stop_rank_once_written(&ds, &x.name, &script, &s1, (0, "20s"))
    else {
        return;
    };
    // The test's own bound, far past the timeout: a hang fails here (the run killed).
    let (status, said) = finish(child, stopped.at + Duration::from_secs(90));
    let ended = stopped.at.elapsed();
    assert!(!status.success(), "{said}");
    assert!(
        said.contains("rank 1 on ") && said.contains(": rank 0 did not answer within 20.0 s"),
        "rank 1 names rank 0 once the timeout passed: {said}"
    );
    // "within 20.0 s" is the posted picture's deadline (a rank 0 silent with nothing posted
    // is named after 40 s). The run ends after the rest of the frame rank 1 was rendering,
    // the timeout, and mpirun ending the stopped rank 0: well before one and a half times
    // the timeout (rank 1 once waited for its sends again after naming rank 0, ending the
    // run after twice the timeout). The timeout is long: rank 1 names a rank 0 that takes
    // no picture for that long, as when it builds its pipelines on a loaded software
    // adapter.
    assert!(ended < Duration::from_secs(30), "{ended:?}: {said}");
    eprintln!(
        "rank 0 stopped: the run ended {:.1} s later",
        ended.as_secs_f64()
    );
}

/// `--gpus 0,0` in the window across 2 ranks: every rank plays two GPUs (one adapter named
/// twice), 4 workers, rank 0's first presenting. Frames are presented in order, frame `f`
/// from worker `f mod 4`; the overlay has a row per (rank, GPU) naming the rank; an exact
/// paused jump to frame 7 lands from rank 1's second GPU with frame 7's picture.
#[test]
fn window_across_two_ranks_with_two_gpus_each_plays_in_order() {
    let Some((x, ds, dir)) = window_set_up("mpi-window-gpus") else {
        return;
    };
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    let script = format!(
        "wait-frames 8; dump-state {s1}; key Space; scrub 7; wait-shown 7; wait 200ms; \
         render {img}; dump-state {s2}; quit",
        s1 = p("s1.json"),
        s2 = p("s2.json"),
        img = p("img.png"),
    );
    let flags = [compared_across_ranks(), vec!["--gpus", "0,0"]].concat();
    let mut cmd = window(&ds, &x.name, &flags, &script, "60s");
    if run_window(&mut cmd, Duration::from_secs(400)).is_none() {
        return;
    }
    let s1 = read_state(&dir, "s1.json");
    assert_eq!(s1["frame_count"], 8);
    let order = presented(&s1);
    assert!(order.len() >= 8, "{order:?}");
    in_order_from_owners(&order, 8, 4, false);
    let rows = s1["gpus"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "a row per (rank, GPU): {s1}");
    for (k, r) in rows.iter().enumerate() {
        assert_eq!(r["gpu"], k as u64, "{r}");
        assert_eq!(r["rank"], (k / 2) as u64, "{r}");
        assert!(!r["host"].as_str().unwrap().is_empty(), "{r}");
        assert!(r["frames_shown"].as_u64().unwrap() >= 1, "{r}");
    }
    let s2 = read_state(&dir, "s2.json");
    assert_eq!(s2["shown_frame"], 7, "{s2}");
    assert_eq!(s2["playing"], false);
    assert_eq!(presented(&s2).last(), Some(&(7, 3)), "{s2}");
    presented_is_a_render_of(&ds, &dir, &s2, 7);
}

#[test]
fn rank_0_without_a_display_ends_every_rank_at_once() {
    if !have_mpirun() {
        return;
    }
    let ds = dataset();
    let started = Instant::now();
    let out = launch_exporting(Some(2), bin(), "supercell-mpi-window-xdg", &[])
        .args(["play", ds.to_str().unwrap(), "--timeout", "60s"])
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("rank 0 on "), "{said}");
    assert!(said.contains("cannot open a window"), "{said}");
    assert!(said.contains("ending the run"), "{said}");
    // Not after rank 1's 120 s wait for rank 0.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}: {said}",
        started.elapsed()
    );
}
