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

/// Any of the dataset's attributes can be shown at run time, not only the scene's: one not in
/// a slot takes a new slot, or a hidden one's where all eight are taken; a ninth shown at
/// once is refused. The frame then renders with the slots as chosen.
#[test]
fn any_dataset_attribute_can_be_shown_at_most_eight_at_once() {
    let Some(g) = gpu() else { return };
    let names: Vec<String> = (0..10).map(|k| format!("a{k}")).collect();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ds");
    let mut w = DatasetWriter::create(
        &data,
        LaneSpec::Count(1),
        1 << 20,
        names.iter().map(AttributeSpec::new).collect(),
        Provenance::new("test", ["play_shown_parts"]),
    )
    .unwrap();
    let grid = test_grid(GridType::Fp8, false);
    w.push_frame(0.0, vec![grid; names.len()]).unwrap();
    w.finish().unwrap();
    let cfg = PlayerConfig {
        width: 48,
        height: 32,
        path: PathSel::Host,
        threads: 2,
        attributes: Some(vec!["a0".into(), "a1".into()]),
        ..PlayerConfig::default()
    };
    let mut p = Player::new(&g.device, &g.queue, &data, &cfg).expect("player");
    p.set_playing(false);
    let shown = |p: &Player| -> Vec<usize> {
        p.dataset_attributes()
            .iter()
            .enumerate()
            .filter(|(_, (_, on))| *on)
            .map(|(a, _)| a)
            .collect()
    };
    assert_eq!(p.dataset_attributes().len(), 10);
    assert_eq!(shown(&p), [0, 1]);
    // An attribute the scene does not name takes a new slot.
    p.set_dataset_attribute_shown(5, true).unwrap();
    assert_eq!(p.attribute_names()[2], "a5");
    assert_eq!(shown(&p), [0, 1, 5]);
    for a in [2, 3, 4, 6, 7] {
        p.set_dataset_attribute_shown(a, true).unwrap();
    }
    assert_eq!(shown(&p), [0, 1, 2, 3, 4, 5, 6, 7]);
    let e = p
        .set_dataset_attribute_shown(9, true)
        .expect_err("a ninth attribute shown");
    assert!(e.contains("a9") && e.contains("at most 8"), "{e}");
    // Hiding one frees its slot for another.
    let freed = p.attribute_names().iter().position(|n| n == "a3").unwrap();
    p.set_dataset_attribute_shown(3, false).unwrap();
    p.set_dataset_attribute_shown(9, true).unwrap();
    assert_eq!(p.attribute_names()[freed], "a9");
    assert_eq!(p.attribute_names().len(), 8);
    assert_eq!(shown(&p), [0, 1, 2, 4, 5, 6, 7, 9]);
    // Showing an attribute that is already shown, or hiding a hidden one, changes nothing.
    p.set_dataset_attribute_shown(9, true).unwrap();
    p.set_dataset_attribute_shown(8, false).unwrap();
    assert_eq!(shown(&p), [0, 1, 2, 4, 5, 6, 7, 9]);
    run_until(&mut p, "frame 0", |p| p.shown_frame() == Some(0));
    p.tick().expect("tick");
    assert_eq!(p.last_error(), None);
    p.drain(Duration::from_secs(5));
}
