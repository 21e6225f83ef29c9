//! The player's window with several GPUs (`--gpus 0,0`: two players on one adapter), under
//! an Xvfb of its own, driven by a script: frames presented strictly in order by both
//! GPUs, the overlay's per-GPU rows and total, the refused toggle, an exact jump to a frame
//! of GPU 1 whose copied image is the picture of that frame, and a camera change that
//! reaches GPU 1 (the frame on screen is presented again in a new picture), the R key playing
//! the timeline backwards and the L key changing its play mode.
//!
//! Without a GPU adapter or Xvfb the test prints why and passes, unless
//! `SUPERCELL_REQUIRE_GPU` is set (CI sets it). `SUPERCELL_TEST_GPUS` names other GPUs
//! (e.g. `0,1` on a machine with two).

use std::process::Command;
use std::time::{Duration, Instant};

mod play_support;
mod storm_support;
use play_support::window::{
    compared_window, fresh_dir, in_order_from_owners, on_display, presented,
    presented_is_a_render_of, read_state, run_window,
};
use play_support::{bin, dataset, gpu, mean_abs_diff, own_xvfb, read_png, skip};

#[test]
fn window_plays_two_gpus_in_order_with_their_rows() {
    if gpu().is_none() {
        return;
    }
    let Some(x) = own_xvfb(1024, 768) else {
        skip("no Xvfb");
        return;
    };
    let ds = dataset();
    let dir = fresh_dir("window-gpus");
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    // Frame 5 belongs to GPU 1 of two (alternate frames): its picture reaches the screen as
    // a copy.
    let script = format!(
        "wait-frames 6; dump-state {s1}; key D; wait 200ms; dump-state {s2}; key Space; \
         scrub 5; wait-shown 5; wait 200ms; render {img}; dump-state {s3}; key a; key a; \
         wait-frames 1; wait 200ms; render {img2}; dump-state {s4}; key Space; wait-frames 1; \
         key a; wait 100ms; key a; wait 100ms; key x; wait-frames 3; dump-state {s5}; \
         key r; wait-frames 5; dump-state {s6}; key l; wait 100ms; dump-state {s7}; \
         key v; wait 100ms; dump-state {s8}; quit",
        s1 = p("s1.json"),
        s2 = p("s2.json"),
        s3 = p("s3.json"),
        s4 = p("s4.json"),
        s5 = p("s5.json"),
        s6 = p("s6.json"),
        s7 = p("s7.json"),
        s8 = p("s8.json"),
        img = p("img.png"),
        img2 = p("img2.png"),
    );
    let gpus = std::env::var("SUPERCELL_TEST_GPUS").unwrap_or_else(|_| "0,0".into());
    let ordinals: Vec<u64> = gpus.split(',').map(|g| g.trim().parse().unwrap()).collect();
    let g = ordinals.len() as u64;
    assert!(g >= 2, "SUPERCELL_TEST_GPUS={gpus}: name two GPUs or more");
    let owner5 = (5, 5 % g);
    let started = Instant::now();
    let mut cmd = Command::new(bin());
    cmd.args(["play", ds.to_str().unwrap(), "--gpus", &gpus])
        .args(compared_window())
        .args(["--script", &script]);
    let Some(stderr) = run_window(on_display(&mut cmd, &x.name), Duration::from_secs(300)) else {
        return;
    };
    assert!(
        stderr.contains(&format!("GPU 1 (--gpus {})", ordinals[1])),
        "{stderr}"
    );
    let read = |n: &str| read_state(&dir, n);

    let s1 = read("s1.json");
    playing_in_order_with_a_row_per_gpu(&s1, &ordinals);

    // The toggle switches every GPU or none: without CUDA none, with the reason.
    let s2 = read("s2.json");
    if supercell::gpu::cuda_probe().is_err() {
        assert_eq!(s2["active_path"], "host", "{s2}");
        assert!(
            s2["message"].as_str().unwrap().contains("unavailable"),
            "{s2}"
        );
    } else {
        assert_eq!(s2["active_path"], "direct", "{s2}");
    }

    // The jump landed exactly on frame 5, from its owner, paused; the picture presented is
    // frame 5's (its owner's image copied to GPU 0), as a one-GPU render of it.
    let s3 = read("s3.json");
    assert_eq!(s3["shown_frame"], 5, "{s3}");
    assert_eq!(s3["playing"], false);
    // The legend's label is the whole timeline's frame 5 (GPU 0's player has half of them).
    let label = s3["legend"]["time_label"].as_str().unwrap();
    assert!(label.contains("frame 5 of 8"), "{label}");
    assert!(s3["last_scrub_ms"].as_f64().is_some(), "{s3}");
    assert_eq!(presented(&s3).last(), Some(&owner5), "{s3}");
    let (img, _) = presented_is_a_render_of(&ds, &dir, &s3, 5);

    // The camera turned: the owner renders frame 5 again for the new view, and it is presented
    // again (not the image of the old view), still paused on frame 5.
    let s4 = read("s4.json");
    assert_eq!(s4["shown_frame"], 5, "{s4}");
    assert_eq!(presented(&s4).last(), Some(&owner5), "{s4}");
    assert!(
        s4["frames_shown"].as_u64().unwrap() > s3["frames_shown"].as_u64().unwrap(),
        "not presented again after the camera turned: {s4}"
    );
    let (_, _, img2) = read_png(&dir.join("img2.png"));
    let moved = mean_abs_diff(&img2, &img);
    assert!(
        moved > 1.0,
        "the picture did not change with the camera: {moved}"
    );

    // Playing on while the camera turns: the timeline goes on in order from frame 5, each
    // frame from its owner, never held back on the frame on screen.
    let s5 = read("s5.json");
    assert_eq!(s5["playing"], true, "{s5}");
    let before = presented(&s4).len();
    let after = &presented(&s5)[before - 1..];
    assert!(after.len() >= 5, "{after:?}");
    assert_eq!(after[0], owner5);
    in_order_from_owners(after, 8, g, false);
    // The R key reverses the several GPUs' timeline: strictly descending from the frame on
    // screen, wrapping, each frame from its owner.
    let s6 = read("s6.json");
    assert_eq!(s6["direction"], "reverse", "{s6}");
    assert_eq!(s6["playing"], true, "{s6}");
    let turned = &presented(&s6)[presented(&s5).len() - 1..];
    assert!(turned.len() >= 5, "{turned:?}");
    in_order_from_owners(turned, 8, g, true);
    // The L key changes the play mode (loop to ping-pong) at run time.
    let s7 = read("s7.json");
    assert_eq!(s7["mode"], "ping-pong", "{s7}");
    eprintln!(
        "window with {g} GPUs: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    full_figures_of_several_gpus(&read("s8.json"), g);
}

/// Playing: frames presented one after another in order, each from its owner, both GPUs;
/// the overlay's rows, one per GPU of `ordinals` and the total.
fn playing_in_order_with_a_row_per_gpu(s1: &serde_json::Value, ordinals: &[u64]) {
    let g = ordinals.len() as u64;
    assert!(s1["frames_shown"].as_u64().unwrap() >= 6, "{s1}");
    assert_eq!(s1["frame_count"], 8);
    let order = presented(s1);
    assert!(order.len() >= 6, "{order:?}");
    in_order_from_owners(&order, 8, g, false);
    // The overlay's rows: one per GPU and the total, in the figures panel.
    let rows = s1["gpus"]["rows"].as_array().unwrap();
    assert_eq!(rows.len() as u64, g, "{s1}");
    for (k, r) in rows.iter().enumerate() {
        assert_eq!(r["gpu"], k as u64);
        assert_eq!(r["ordinal"], ordinals[k]);
        assert!(!r["adapter"].as_str().unwrap().is_empty());
        assert!(!r["path_label"].as_str().unwrap().is_empty());
        assert!(r["frames_shown"].as_u64().unwrap() >= 1, "{r}");
    }
    // GPU 0's images are shown where they are; GPU 1's are copied, and the copies timed.
    assert!(rows[0]["copy_ms"].is_null(), "{s1}");
    assert!(rows[1]["copy_ms"].as_f64().unwrap() > 0.0, "{s1}");
    assert_eq!(s1["gpus"]["total"]["gpus"], g);
    let lines: Vec<String> = serde_json::from_value(s1["lines"].clone()).unwrap();
    assert!(lines.iter().any(|l| l.starts_with("GPU0 ")), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("GPU1 ")), "{lines:?}");
    assert!(
        lines.iter().any(|l| l.contains("presented")),
        "the total: {lines:?}"
    );
    assert_eq!(s1["active_path"], "host");
    // The figures panel's one table: both paths' figures of every GPU under one header.
    let table: Vec<Vec<String>> = serde_json::from_value(s1["table"].clone()).unwrap();
    assert_eq!(table.len() as u64, 1 + 3 * g, "{table:?}");
    assert_eq!(table[0][1], "direct avg");
    for k in 0..g {
        for rate in ["frames/s rendered", "frames/s delivered", "GB/s"] {
            let name = format!("GPU{k} {rate}");
            assert!(table.iter().any(|r| r[0] == name), "{name}: {table:?}");
        }
    }
}

/// The full figures (V) of several GPUs: a row per GPU and the total as before, and the
/// CPU, every GPU's memory, the frame and render lines one GPU's figures have.
fn full_figures_of_several_gpus(s8: &serde_json::Value, g: u64) {
    assert_eq!(s8["compact"], false, "{s8}");
    let lines: Vec<String> = serde_json::from_value(s8["lines"].clone()).unwrap();
    for k in 0..g {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("GPU {k} (#"))),
            "{lines:?}"
        );
    }
    let cpu = lines
        .iter()
        .find(|l| l.starts_with("CPU "))
        .expect("CPU line");
    for k in 0..g {
        assert!(cpu.contains(&format!("GPU {k} ")), "{cpu}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("frame ") && l.contains("t = ")),
        "{lines:?}"
    );
    assert!(lines.iter().any(|l| l.starts_with("render: ")), "{lines:?}");
}
