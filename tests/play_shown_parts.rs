//! The player binds only the parts its shown attributes' grids span: frames larger than the
//! device binds at once play while the attributes shown fit, and showing one more that does
//! not fit is refused with a message naming the attributes, never a failed frame.
//!
//! Parts are forced to 64 KiB (the smallest), and the two attributes' grids are padded
//! ([`render_support::padded`]) so that each alone spans a little over half the parts the
//! device binds: together they do not fit.

mod play_support;
mod render_support;
mod storm_support;

use std::time::{Duration, Instant};

use play_support::gpu;
use render_support::{padded, test_grid};
use supercell::app::{PathSel, Player, PlayerConfig};
use supercell::dataset::{AttributeSpec, DatasetWriter, LaneSpec, Provenance};
use supercell::format::GridType;
use supercell::render::{FrameCapacity, MIN_PART_BYTES};

fn run_until(player: &mut Player, what: &str, mut done: impl FnMut(&Player) -> bool) {
    let end = Instant::now() + Duration::from_secs(240);
    while !done(player) {
        assert!(
            Instant::now() < end,
            "timed out waiting for {what}: frame {:?} shown, error {:?}",
            player.shown_frame(),
            player.last_error()
        );
        if player.tick().expect("tick").shown.is_none() {
            player.wait(Duration::from_millis(2));
        }
    }
}

#[test]
fn showing_attributes_that_span_more_parts_than_the_device_binds_is_refused() {
    let Some(g) = gpu() else { return };
    let capacity = FrameCapacity::of(
        &g.caps,
        g.device.limits().max_storage_buffers_per_shader_stage,
    );
    let part = MIN_PART_BYTES;
    // Each grid a little over half the parts the device binds: one fits, both do not.
    let grids = [
        test_grid(GridType::Float, false),
        test_grid(GridType::Fp8, false),
    ];
    let largest = grids.iter().map(Vec::len).max().unwrap() as u64;
    let each = ((capacity.max_parts as u64 / 2 + 2) * part).max(largest + 4096);
    assert!(each.div_ceil(part) < capacity.max_parts as u64);
    let grid = |k: usize| {
        let gap = (each - grids[k].len() as u64) / 4096 * 4096;
        padded(&grids[k], gap)
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    let mut w = DatasetWriter::create(
        &data,
        LaneSpec::Count(1),
        1 << 20,
        vec![AttributeSpec::new("cloud"), AttributeSpec::new("rain")],
        Provenance::new("test", ["play_shown_parts"]),
    )
    .unwrap();
    for t in 0..2 {
        w.push_frame(f64::from(t), vec![grid(0), grid(1)]).unwrap();
    }
    let m = w.finish().unwrap();
    assert!(
        m.frames[0].slot_size > capacity.max_parts as u64 * part,
        "the frame is larger than the device binds in {part}-byte parts"
    );

    let cfg = PlayerConfig {
        width: 48,
        height: 32,
        path: PathSel::Host,
        threads: 2,
        part_bytes: Some(part),
        ..PlayerConfig::default()
    };
    let t0 = Instant::now();
    let mut p = Player::new(&g.device, &g.queue, &data, &cfg).expect("player");
    eprintln!("player opened in {:.1?}", t0.elapsed());
    p.set_playing(false);
    // Both shown do not fit: rain off first, then frames play.
    p.set_attribute_shown(1, false)
        .expect("hiding is always allowed");
    run_until(&mut p, "frame 0", |p| p.shown_frame() == Some(0));
    eprintln!("frame 0 shown at {:.1?}", t0.elapsed());
    let e = p
        .set_attribute_shown(1, true)
        .expect_err("both attributes do not fit the parts bound");
    assert!(
        e.contains("cloud") && e.contains("rain") && e.contains("show fewer attributes"),
        "{e}"
    );
    assert!(
        e.contains(&format!("binds {} at once", capacity.max_parts)),
        "{e}"
    );
    assert!(!p.view().attributes[1].as_ref().unwrap().enabled);
    // Cloud off, rain on: frames show rain, from its parts alone.
    p.set_attribute_shown(0, false).unwrap();
    p.set_attribute_shown(1, true).unwrap();
    p.scrub(1);
    run_until(&mut p, "frame 1", |p| {
        !p.scrub_pending() && p.shown_frame() == Some(1)
    });
    p.tick().expect("tick");
    assert_eq!(p.last_error(), None);
    let img = p.read_image().expect("image");
    let lit = img.linear.iter().filter(|px| px[3] > 0.01).count();
    assert!(lit > 0, "rain shows");
    p.drain(Duration::from_secs(5));
}
