//! The legend burnt into rendered images: its bar shows, value by value, the colour of the
//! transfer-function table the renderer uploads, and `render --annotate` (or the scene's
//! `[overlay] annotate`) writes it with the name, unit, range and time.

use std::path::Path;
use std::process::Command;

use supercell::app::legend::{Annotation, LegendEntry, annotate, legend_colour, time_label};
use supercell::render::{Image, TF_SIZE, TransferFunction, sample_table, srgb_encode};
use supercell::scene::Scene;

mod storm_support;
use storm_support::SmallStorm;

fn to_u8(x: f32) -> i32 {
    (srgb_encode(x.clamp(0.0, 1.0)) * 255.0).round() as i32
}

fn pixel(img: &Image, x: u32, y: u32) -> [u8; 4] {
    let i = (y as usize * img.width as usize + x as usize) * 4;
    img.rgba8[i..i + 4].try_into().unwrap()
}

#[test]
fn a_bar_pixel_at_value_v_is_the_transfer_functions_colour_at_v() {
    // A smooth map and a stepped one (radar colours jump between stops).
    for (preset, range) in [("wind_speed", [0.0, 60.0]), ("reflectivity", [5.0, 75.0])] {
        let tf = TransferFunction::preset(preset, range, 30_000.0);
        let entry = LegendEntry {
            name: preset.into(),
            units: Some("m/s".into()),
            range,
            table: tf.bake(),
        };
        let a = Annotation {
            entries: vec![entry.clone()],
            time_label: "t = 0 s".into(),
        };
        let mut img = Image::new(1024, 480);
        let bars = annotate(&mut img, &a);
        assert_eq!(bars.len(), 1);
        let bar = &bars[0];
        assert!(bar.width >= 200, "{bar:?}");
        let row = bar.colour_rows.start + bar.colour_rows.len() as u32 / 2;
        let mut steps_checked = 0;
        for k in 0..=40 {
            let v = range[0] + (range[1] - range[0]) * k as f32 / 40.0;
            let x = bar.column_of(v).expect("in range");
            let got = pixel(&img, x, row);
            // The table as the CPU renderer reads it, at the column's value.
            let u = bar.u_of_column(x);
            let want = sample_table(&entry.table, u);
            for c in 0..3 {
                assert!(
                    (i32::from(got[c]) - to_u8(want[c])).abs() <= 1,
                    "{preset} at {v}: bar {got:?}, table {want:?}"
                );
            }
            // The transfer function evaluated directly at v itself: the same colour where
            // the map is smooth over the column's width (8-bit rounding); a stop's jump
            // may fall between v and the column's centre.
            let direct = tf.eval((v - range[0]) / (range[1] - range[0]));
            let far = (0..3)
                .map(|c| (i32::from(got[c]) - to_u8(direct[c])).abs())
                .max()
                .unwrap();
            if far <= 2 {
                steps_checked += 1;
            }
            assert!(
                far <= 2 || preset == "reflectivity",
                "{preset} at {v}: bar {got:?}, eval {direct:?}"
            );
        }
        assert!(
            steps_checked >= 30,
            "{preset}: only {steps_checked} of 41 agree"
        );
        // The opacity strip is the colour over the checkerboard by the opacity: opaque
        // values show their colour there too, transparent ones the checkerboard.
        let orow = bar.opacity_rows.start;
        let top = bar.column_of(range[1]).unwrap();
        let opaque = legend_colour(&entry.table, bar.u_of_column(top));
        if opaque[3] == 255 {
            assert_eq!(pixel(&img, top, orow)[..3], opaque[..3]);
        }
        let bottom = bar.column_of(range[0]).unwrap();
        if legend_colour(&entry.table, bar.u_of_column(bottom))[3] == 0 {
            let p = pixel(&img, bottom, orow);
            assert!(p[0] == p[1] && p[1] == p[2], "checkerboard grey: {p:?}");
        }
    }
}

#[test]
fn each_entry_gets_its_own_bar_and_a_small_image_is_clipped_not_a_panic() {
    let tf = TransferFunction::preset("cloud", [0.0, 4.0], 30_000.0);
    let entry = |n: &str| LegendEntry {
        name: n.into(),
        units: None,
        range: [0.0, 4.0],
        table: tf.bake(),
    };
    let a = Annotation {
        entries: (0..8).map(|i| entry(&format!("a{i}"))).collect(),
        time_label: "frame 3 of 9".into(),
    };
    let mut img = Image::new(640, 360);
    let bars = annotate(&mut img, &a);
    assert_eq!(bars.len(), 8);
    for (i, b) in bars.iter().enumerate() {
        for o in &bars[..i] {
            let apart = b.x != o.x || b.colour_rows.start != o.colour_rows.start;
            assert!(apart, "bars {i} and another overlap: {b:?} {o:?}");
        }
    }
    for (w, h) in [(1, 1), (16, 9), (3, 200)] {
        let mut tiny = Image::new(w, h);
        annotate(&mut tiny, &a);
    }
    assert_eq!(TF_SIZE, a.entries[0].table.len());
}

fn storm(dir: &Path) {
    SmallStorm {
        resolution: 16,
        frames: 2,
        lanes: 1,
        chunk: 8 << 20,
        attributes: None,
        made_by: "legend test",
    }
    .write(dir);
}

fn render(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_supercell"))
        .arg("render")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "render {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read_png(path: &Path) -> Image {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgba);
    buf.truncate(info.buffer_size());
    let mut img = Image::new(info.width, info.height);
    img.rgba8 = buf;
    img
}

#[test]
fn render_annotate_burns_the_legend_of_the_shown_attributes_into_each_png() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("storm");
    storm(&ds);
    let (plain, annotated) = (tmp.path().join("plain"), tmp.path().join("annotated"));
    let args = |extra: &[&str], out: &Path| {
        let mut v = vec![ds.to_str().unwrap().to_owned()];
        v.extend(extra.iter().map(|s| s.to_string()));
        v.extend(["--cpu", "--size", "320x180", "--frames", "0..2", "--out"].map(String::from));
        v.push(out.to_str().unwrap().to_owned());
        v
    };
    let plain_args = args(&[], &plain);
    render(&plain_args.iter().map(String::as_str).collect::<Vec<_>>());
    let annotated_args = args(&["--annotate"], &annotated);
    render(
        &annotated_args
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );

    // What the command drew, laid out again here from the scene it opened.
    let scene = Scene::load(&ds).unwrap();
    let ls = scene.open(320.0 / 180.0, None).unwrap();
    let manifest = ls.dataset.manifest();
    assert_eq!(manifest.attributes[0].units.as_deref(), Some("g/kg"));
    for f in 0..2 {
        let legend = Annotation::for_view(&ls.view, &ls.slots, manifest, f);
        assert_eq!(legend.time_label, time_label(manifest, f));
        assert!(!legend.entries.is_empty());
        let name = format!("frame_{f:05}.png");
        let base = read_png(&plain.join(&name));
        let got = read_png(&annotated.join(&name));
        let mut expect = base.clone();
        let bars = annotate(&mut expect, &legend);
        assert_eq!(
            got.rgba8, expect.rgba8,
            "frame {f}: the legend drawn over the plain render"
        );
        assert_ne!(got.rgba8, base.rgba8);
        // And the bars' colours are the uploaded table's, slot by slot.
        let table = ls.view.tf_table();
        for (e, bar) in legend.entries.iter().zip(&bars) {
            let slot = ls
                .slots
                .iter()
                .position(|s| s.map(|a| manifest.attributes[a].name == e.name) == Some(true))
                .unwrap();
            let row = &table[slot * TF_SIZE..(slot + 1) * TF_SIZE];
            let x = bar.x + bar.width / 3;
            if bar.colour_rows.start < got.height && x < got.width {
                let want = legend_colour(row, bar.u_of_column(x));
                assert_eq!(
                    pixel(&got, x, bar.colour_rows.start)[..3],
                    want[..3],
                    "{}",
                    e.name
                );
            }
        }
    }
    // The generator's frames are seconds apart, not numbered 0, 1: the label gives both.
    let label = time_label(manifest, 1);
    let t = manifest.frames[1].time;
    assert_ne!(t, 1.0, "the generator's times are not frame indices");
    assert!(
        label.starts_with("t = ") && label.ends_with("(frame 1 of 2)"),
        "{label}"
    );
    // The scene key does what the flag does.
    let scene_file = tmp.path().join("annotated.toml");
    std::fs::write(
        &scene_file,
        format!(
            "dataset = {:?}\n\n[overlay]\nannotate = true\n",
            ds.to_str().unwrap()
        ),
    )
    .unwrap();
    let by_scene = tmp.path().join("by_scene");
    render(&[
        scene_file.to_str().unwrap(),
        "--cpu",
        "--size",
        "320x180",
        "--out",
        by_scene.to_str().unwrap(),
    ]);
    let got = read_png(&by_scene.join("frame_00000.png"));
    assert_ne!(got.rgba8, read_png(&plain.join("frame_00000.png")).rgba8);
}

#[test]
fn the_time_label_gives_simulation_time_where_the_dataset_has_times() {
    use supercell::dataset::{AttributeSpec, Dataset, DatasetWriter, LaneSpec, Provenance};
    let label = |times: [f64; 2]| {
        let tmp = tempfile::tempdir().unwrap();
        let mut w = DatasetWriter::create(
            tmp.path(),
            LaneSpec::Count(1),
            8192,
            vec![AttributeSpec::new("a")],
            Provenance::new("test", ["x"]),
        )
        .unwrap();
        for t in times {
            w.push_frame_opaque(t, vec![vec![1; 8192]]).unwrap();
        }
        w.finish().unwrap();
        let ds = Dataset::open(tmp.path()).unwrap();
        time_label(ds.manifest(), 1)
    };
    // An import without times numbers the frames 0, 1, ...: no time to give.
    assert_eq!(label([0.0, 1.0]), "frame 1 of 2");
    assert_eq!(label([0.0, 30.0]), "t = 30 s  (frame 1 of 2)");
    assert_eq!(
        label([600.0, 5400.0]),
        "t = 5400 s (1:30:00)  (frame 1 of 2)"
    );
}
