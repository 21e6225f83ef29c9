//! Scene files: every kind of error names the file, line, column and field; the shipped
//! scenes load; camera paths are smooth, hit their keys and loop without a seam.

use std::path::{Path, PathBuf};

use supercell::pipeline::PlayMode;
use supercell::render::{Camera, Colormap, View};
use supercell::scene::{CameraKey, CameraPath, DatasetSpec, Scene, SceneError};
use supercell::synth::Attribute;

mod storm_support;
use storm_support::SmallStorm;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Parses `text` as `bad.toml` and returns its error.
fn err(text: &str) -> SceneError {
    match Scene::parse(text, Path::new("scenes/bad.toml")) {
        Ok(_) => panic!("scene parsed but should not:\n{text}"),
        Err(e) => e,
    }
}

fn check(e: &SceneError, line: usize, field: &str, needle: &str) {
    assert_eq!(e.file, Path::new("scenes/bad.toml"), "{e}");
    assert_eq!(e.line, Some(line), "{e}");
    assert!(e.column.is_some(), "{e}");
    assert_eq!(e.field.as_deref(), Some(field), "{e}");
    assert!(e.message.contains(needle), "{e}: wanted {needle:?}");
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!("scenes/bad.toml:{line}:")),
        "{shown}"
    );
    assert!(shown.contains(&format!(": {field}: ")), "{shown}");
}

const PATH_HEAD: &str = "[camera_path]
looped = true

[[camera_path.key]]
time_s = 0.0

[[camera_path.key]]
time_s = 10.0
";

#[test]
fn syntax_error_names_line() {
    let e = err("dataset = \"x\"\n[camera]\nyaw_deg = = 3\n");
    assert_eq!(e.line, Some(3), "{e}");
    assert_eq!(e.file, Path::new("scenes/bad.toml"));
    assert!(e.to_string().starts_with("scenes/bad.toml:3:"), "{e}");
}

#[test]
fn type_error_names_line_and_field() {
    let text = format!("{PATH_HEAD}\n[[camera_path.key]]\ntime_s = 20.0\nyaw_deg = \"fast\"\n");
    let e = err(&text);
    check(
        &e,
        12,
        "camera_path.key[2].yaw_deg",
        "expected a number, found a string",
    );
    assert_eq!(e.column, Some(11), "{e}");
}

#[test]
fn unknown_field_names_line_and_field() {
    let e = err("[camera]\nyaw_deg = 10.0\nzoom = 2.0\n");
    check(&e, 3, "camera.zoom", "unknown field");
    let e = err(
        "[[attribute]]\nname = \"cloud\"\n\n[[attribute]]\nname = \"rain\"\ncolour = \"blue\"\n",
    );
    check(&e, 6, "attribute[1].colour", "unknown field");
    let e = err("dataset = \"a\"\nfps = 3\n");
    check(&e, 2, "fps", "unknown field");
}

#[test]
fn semantic_errors_name_line_and_field() {
    check(
        &err("[camera]\nfov_y_deg = 200.0\n"),
        2,
        "camera.fov_y_deg",
        "between 1 and 179",
    );
    check(
        &err("[camera]\ndistance = -1.0\n"),
        2,
        "camera.distance",
        "> 0",
    );
    check(
        &err(&format!("{PATH_HEAD}\n[[camera_path.key]]\ntime_s = 5.0\n")),
        11,
        "camera_path.key[2].time_s",
        "increase strictly",
    );
    check(
        &err(&format!("{PATH_HEAD}pitch_deg = 95.0\n")),
        9,
        "camera_path.key[1].pitch_deg",
        "−89..89",
    );
    check(
        &err(&format!("{PATH_HEAD}fov_y_deg = 1.0\n")),
        9,
        "camera_path.key[1].fov_y_deg",
        "between 1 and 179",
    );
    check(
        &err("[playback]\nmode = \"loop\"\nfps = -24.0\n"),
        3,
        "playback.fps",
        "≥ 0",
    );
    check(&err("[playback]\nfps = nan\n"), 2, "playback.fps", "≥ 0");
    check(
        &err("[[attribute]]\nname = \"cloud\"\nopacity = [[0.0, 0.0], [0.5, 1.5]]\n"),
        3,
        "attribute[0].opacity[1]",
        "0..1",
    );
    check(
        &err("[[attribute]]\nname = \"cloud\"\nalbedo = 1.5\n"),
        3,
        "attribute[0].albedo",
        "0..1",
    );
    check(
        &err("[[attribute]]\nname = \"cloud\"\nalbedo = [[0.0, [0.5, 0.5, 2.0]]]\n"),
        3,
        "attribute[0].albedo[0]",
        "0..1",
    );
    check(
        &err("[[attribute]]\nname = \"cloud\"\nopacity = [[0.5, 0.0], [0.2, 1.0]]\n"),
        3,
        "attribute[0].opacity[1]",
        "sorted",
    );
    check(
        &err("[[attribute]]\nname = \"cloud\"\ncolormap = \"rainbow\"\n"),
        3,
        "attribute[0].colormap",
        "unknown colormap",
    );
    // Eight attributes composite at once; a ninth is refused where it is written.
    let nine: String = [
        "cloud",
        "rain",
        "wind_speed",
        "vorticity",
        "vertical_velocity",
        "hail",
        "graupel",
        "snow",
        "pressure_perturbation",
    ]
    .iter()
    .map(|n| format!("[[attribute]]\nname = \"{n}\"\n\n"))
    .collect();
    check(&err(&nine), 25, "attribute[8]", "at most 8");
    check(
        &err(
            "[camera_path]\nlooped = true\nduration_s = 5.0\n[[camera_path.key]]\ntime_s = 0.0\n[[camera_path.key]]\ntime_s = 10.0\n",
        ),
        3,
        "camera_path.duration_s",
        "loop period",
    );
}

#[test]
fn missing_file_is_named() {
    let e = Scene::load(Path::new("/nonexistent/scene.toml")).unwrap_err();
    assert_eq!(e.file, Path::new("/nonexistent/scene.toml"));
    assert!(
        e.to_string().starts_with("/nonexistent/scene.toml: "),
        "{e}"
    );
}

#[test]
fn shipped_scenes_parse_and_validate() {
    let dir = repo().join("scenes");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "toml") {
            Scene::load(&p).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert!(n >= 3, "scenes/ holds {n} scenes");
    let s = Scene::builtin();
    assert_eq!(s.dataset, DatasetSpec::Default);
    assert_eq!(s.playback.fps, 3.0);
    assert_eq!(s.playback.mode, PlayMode::Loop);
    assert!(s.overlay.plots);
    let path = s
        .camera_path
        .as_ref()
        .expect("the storm scene has a camera path");
    assert!(path.looped);
    // The camera path spans the built-in sequence's frames at the scene's rate.
    let frames = f64::from(supercell::synth::default_params().frames);
    assert_eq!(path.duration_s(), frames / s.playback.fps);
    let names: Vec<&str> = s.attributes.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["cloud", "funnel_cloud", "rain", "wind_speed"]);
    // The file on disk is the embedded one.
    let on_disk = Scene::load(&dir.join("storm.toml")).unwrap();
    assert_eq!(on_disk.camera_path, s.camera_path);
    assert_eq!(on_disk.settings, s.settings);
}

#[test]
fn relative_dataset_paths_resolve_next_to_the_scene() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("scenes");
    std::fs::create_dir_all(&sub).unwrap();
    let f = sub.join("a.toml");
    std::fs::write(&f, "dataset = \"../data/storm\"\n").unwrap();
    let s = Scene::load(&f).unwrap();
    assert_eq!(s.dataset, DatasetSpec::Path(sub.join("../data/storm")));
    std::fs::write(&f, "dataset = \"/abs/storm\"\n").unwrap();
    assert_eq!(
        Scene::load(&f).unwrap().dataset,
        DatasetSpec::Path("/abs/storm".into())
    );
    // ~/ is the home directory.
    std::fs::write(&f, "dataset = \"~/storm\"\n").unwrap();
    let home = std::env::var_os("HOME").expect("HOME is set");
    assert_eq!(
        Scene::load(&f).unwrap().dataset,
        DatasetSpec::Path(PathBuf::from(home).join("storm"))
    );
    // No dataset line: the built-in dataset.
    std::fs::write(&f, "[playback]\nfps = 0\n").unwrap();
    let s = Scene::load(&f).unwrap();
    assert_eq!(s.dataset, DatasetSpec::Default);
    assert_eq!(s.playback.fps, 0.0);
}

fn small_dataset(dir: &Path) {
    SmallStorm {
        resolution: 24,
        frames: 2,
        lanes: 1,
        chunk: 1 << 20,
        attributes: Some(&[Attribute::Cloud, Attribute::Rain]),
        made_by: "scene test",
    }
    .write(dir);
}

#[test]
fn dataset_directory_gives_defaults_and_open_checks_names() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("storm");
    small_dataset(&ds);
    let s = Scene::load(&ds).unwrap();
    assert_eq!(s.source, ds);
    assert_eq!(s.dataset, DatasetSpec::Path(ds.clone()));
    assert!(s.attributes.is_empty());
    assert!(s.camera_path.is_none());
    assert_eq!(s.playback, Default::default());
    assert_eq!(s.overlay, Default::default());
    let ls = s.open(16.0 / 9.0, None).unwrap();
    assert_eq!(ls.slots, vec![Some(0), Some(1)]);
    assert_eq!(ls.view.camera, ls.fitted);

    // A scene naming an attribute the dataset lacks: line of that name, and what it has.
    let f = tmp.path().join("s.toml");
    std::fs::write(
        &f,
        "dataset = \"storm\"\n\n[[attribute]]\nname = \"cloud\"\n\n[[attribute]]\nname = \"snow\"\n",
    )
    .unwrap();
    let e = Scene::load(&f).unwrap().open(1.0, None).err().unwrap();
    assert_eq!(e.file, f);
    assert_eq!(e.line, Some(7), "{e}");
    assert_eq!(e.field.as_deref(), Some("attribute[1].name"), "{e}");
    assert!(e.message.contains("cloud, rain"), "{e}");

    // --attributes keeps the scene's look of an attribute it names (it dropped it: a
    // scene's radar colours for dbz became the preset's with `render --attributes dbz`),
    // shows it even where the scene hides it, and gives others their preset.
    std::fs::write(
        &f,
        "dataset = \"storm\"\n[[attribute]]\nname = \"rain\"\nenabled = false\n\
         colormap = \"turbo\"\nrange = [0.5, 3.0]\n",
    )
    .unwrap();
    let names = ["cloud".to_string(), "rain".to_string()];
    let ls = Scene::load(&f).unwrap().open(1.0, Some(&names)).unwrap();
    let look = |i: usize| ls.view.attributes[i].as_ref().unwrap();
    assert_eq!(look(1).tf.colormap, Colormap::Named("turbo".into()));
    assert_eq!(look(1).tf.range, [0.5, 3.0]);
    assert!(look(1).enabled);
    assert_eq!(look(0).tf.colormap, Colormap::Named("cloud".into()));

    // --attributes names are checked too.
    let e = s
        .open(1.0, Some(&["hail".to_string()]))
        .err()
        .expect("unknown attribute");
    assert!(e.message.contains("hail"), "{e}");

    // A start frame past the end points at its line.
    std::fs::write(&f, "dataset = \"storm\"\n[playback]\nstart_frame = 9\n").unwrap();
    let e = Scene::load(&f).unwrap().open(1.0, None).err().unwrap();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(3), Some("playback.start_frame"))
    );

    // A missing dataset points at the dataset line.
    std::fs::write(&f, "\n\ndataset = \"nowhere\"\n").unwrap();
    let e = Scene::load(&f).unwrap().open(1.0, None).err().unwrap();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(3), Some("dataset")),
        "{e}"
    );
}

#[test]
fn an_isosurface_of_an_empty_slot_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    small_dataset(&tmp.path().join("storm"));
    let f = tmp.path().join("s.toml");
    // The dataset's two attributes fill slots 0 and 1; slot 2 (allowed by the renderer's
    // limits) holds nothing.
    let scene = |iso: usize| {
        format!("dataset = \"storm\"\n[settings]\nmode = \"iso\"\niso_attribute = {iso}\n")
    };
    std::fs::write(&f, scene(1)).unwrap();
    assert!(Scene::load(&f).unwrap().open(1.0, None).is_ok());
    std::fs::write(&f, scene(2)).unwrap();
    let e = Scene::load(&f).unwrap().open(1.0, None).err().unwrap();
    assert_eq!(e.file, f);
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(4), Some("settings.iso_attribute")),
        "{e}"
    );
    assert!(e.message.contains("renders 2 attribute(s)"), "{e}");
}

/// Angle between two yaws, 0..180.
fn ang(a: f32, b: f32) -> f32 {
    let d = (a - b).rem_euclid(360.0);
    d.min(360.0 - d)
}

fn fitted() -> Camera {
    Camera::fit(
        [[0.0, 0.0, 0.0], [32_000.0, 32_000.0, 16_000.0]],
        16.0 / 9.0,
    )
}

/// Largest change between consecutive 1 ms samples over `0..until` seconds.
fn assert_continuous(p: &CameraPath, until: f64) {
    let f = fitted();
    let mut prev = p.at(0.0, &f);
    let steps = (until * 1000.0) as usize;
    for i in 1..=steps {
        let t = i as f64 * 1e-3;
        let c = p.at(t, &f);
        assert!(
            ang(c.yaw_deg, prev.yaw_deg) < 0.05,
            "yaw jumps at {t}: {prev:?} → {c:?}"
        );
        assert!(
            (c.pitch_deg - prev.pitch_deg).abs() < 0.05,
            "pitch jumps at {t}"
        );
        assert!(
            (c.distance / prev.distance - 1.0).abs() < 1e-3,
            "distance jumps at {t}"
        );
        assert!(
            (c.fov_y_deg - prev.fov_y_deg).abs() < 0.05,
            "fov jumps at {t}"
        );
        for k in 0..3 {
            assert!(
                (c.target[k] - prev.target[k]).abs() < 5.0,
                "target jumps at {t}"
            );
        }
        prev = c;
    }
}

#[test]
fn builtin_path_is_continuous_across_keys_and_the_loop_seam() {
    let s = Scene::builtin();
    let p = s.camera_path.unwrap();
    // Two whole periods: every key and the seam (twice).
    assert_continuous(&p, 2.0 * p.duration_s() + 0.5);
}

#[test]
fn path_hits_keys_exactly() {
    let f = fitted();
    let p = Scene::builtin().camera_path.unwrap();
    for (i, k) in p.keys().iter().enumerate() {
        for t in [k.time_s, k.time_s + p.duration_s()] {
            let c = p.at(t, &f);
            let yaw = k.yaw_deg.unwrap_or(f.yaw_deg).rem_euclid(360.0);
            assert!(
                ang(c.yaw_deg, yaw) < 1e-3,
                "key {i} at {t}: yaw {}",
                c.yaw_deg
            );
            assert!((c.pitch_deg - k.pitch_deg.unwrap_or(f.pitch_deg)).abs() < 1e-4);
            let d = f.distance * k.distance_scale.unwrap_or(1.0);
            assert!(
                (c.distance / d - 1.0).abs() < 1e-5,
                "key {i}: {} vs {d}",
                c.distance
            );
            let off = k.target_offset.unwrap_or([0.0; 3]);
            for ((got, fit), o) in c.target.iter().zip(f.target).zip(off) {
                assert!((got - (fit + o)).abs() < 1e-2);
            }
        }
    }
}

#[test]
fn yaw_goes_the_short_way_round() {
    let f = fitted();
    let key = |t: f64, yaw: f32| CameraKey {
        time_s: t,
        yaw_deg: Some(yaw),
        ..Default::default()
    };
    let p = CameraPath::new(
        vec![key(0.0, 350.0), key(4.0, 10.0), key(8.0, 30.0)],
        true,
        Some(12.0),
    )
    .unwrap();
    assert_eq!(p.at(0.0, &f).yaw_deg, 350.0);
    assert_eq!(p.at(4.0, &f).yaw_deg, 10.0);
    // From 350° to 10° the camera passes 0°, never 180°.
    for i in 0..=4000 {
        let y = p.at(i as f64 * 1e-3, &f).yaw_deg;
        assert!(ang(y, 0.0) <= 12.0, "yaw {y} at {i} ms");
    }
    assert_continuous(&p, 25.0);
    // A path that does not loop holds its ends.
    let once = CameraPath::new(vec![key(1.0, 350.0), key(2.0, 10.0)], false, None).unwrap();
    assert_eq!(once.at(0.0, &f).yaw_deg, 350.0);
    assert_eq!(once.at(9.0, &f).yaw_deg, 10.0);
}

/// `[settings]` with one line `line` (on line 2 of the file).
fn settings_err(line: &str) -> SceneError {
    err(&format!("[settings]\n{line}\n"))
}

#[test]
fn every_render_setting_is_range_checked() {
    // (line, field, words of the message): NaN, infinities and values the renderer would
    // otherwise clamp or render as garbage.
    let cases = [
        ("exposure = nan", "settings.exposure", "in (0, 10000]"),
        ("exposure = inf", "settings.exposure", "in (0, 10000]"),
        ("exposure = 0.0", "settings.exposure", "in (0, 10000]"),
        // Finite but absurd: radiance × exposure squared overflows f32, the picture black.
        ("exposure = 3e38", "settings.exposure", "in (0, 10000]"),
        ("exposure = 1e5", "settings.exposure", "in (0, 10000]"),
        ("ambient = 3e38", "settings.ambient", "0..10000"),
        (
            "multiple_scattering = 1e20",
            "settings.multiple_scattering",
            "0..10000",
        ),
        (
            "sun_color = [1.0, 3e38, 1.0]",
            "settings.sun_color[1]",
            "0..10000",
        ),
        ("ground_albedo = 1.5", "settings.ground_albedo", "0..1"),
        ("ground_albedo = nan", "settings.ground_albedo", "0..1"),
        ("ground_albedo = -0.1", "settings.ground_albedo", "0..1"),
        ("iso_value = nan", "settings.iso_value", "finite"),
        ("iso_value = -inf", "settings.iso_value", "finite"),
        ("step_tau = 2.0", "settings.step_tau", "0..1"),
        ("step_voxels = 0.001", "settings.step_voxels", "≥ 0.01"),
        ("shadow_tau_max = 100.0", "settings.shadow_tau_max", "0..80"),
        ("shadow_steps = 100000", "settings.shadow_steps", "1..65536"),
        ("shadow_steps = 0", "settings.shadow_steps", "1..65536"),
        ("max_step_scale = 0", "settings.max_step_scale", "1..64"),
        ("max_step_scale = 65", "settings.max_step_scale", "1..64"),
        ("max_steps = 0", "settings.max_steps", "≥ 1"),
        ("work_budget = 0", "settings.work_budget", "≥ 1"),
        (
            "transmittance_cutoff = 1.0",
            "settings.transmittance_cutoff",
            "[0, 1)",
        ),
        (
            "transmittance_cutoff = nan",
            "settings.transmittance_cutoff",
            "[0, 1)",
        ),
        (
            "sun_azimuth_deg = inf",
            "settings.sun_azimuth_deg",
            "finite",
        ),
        (
            "sun_elevation_deg = nan",
            "settings.sun_elevation_deg",
            "-90..90",
        ),
        ("phase_g = 1.0", "settings.phase_g", "(-1, 1)"),
        (
            "multiple_scattering = -0.5",
            "settings.multiple_scattering",
            "0..10000",
        ),
        ("ambient = inf", "settings.ambient", "0..10000"),
        ("ground_spacing = -5.0", "settings.ground_spacing", "≥ 0"),
        ("iso_attribute = 8", "settings.iso_attribute", "0..7"),
        (
            "sun_color = [1.0, nan, 1.0]",
            "settings.sun_color[1]",
            "0..10000",
        ),
        (
            "sky_zenith = [0.1, 0.2, -0.3]",
            "settings.sky_zenith[2]",
            "0..10000",
        ),
        (
            "sky_horizon = [inf, 0.2, 0.3]",
            "settings.sky_horizon[0]",
            "0..10000",
        ),
    ];
    for (line, field, needle) in cases {
        check(&settings_err(line), 2, field, needle);
    }
}

#[test]
fn other_numbers_are_checked_too() {
    let attr = "[[attribute]]\nname = \"cloud\"\n";
    let cases = [
        (
            format!("{attr}colormap = [[0.0, [0.2, nan, 0.2]], [1.0, [1.0, 1.0, 1.0]]]\n"),
            3,
            "attribute[0].colormap[0]",
            "0..1",
        ),
        (
            format!("{attr}colormap = [[0.0, [0.2, 0.2, 1.5]]]\n"),
            3,
            "attribute[0].colormap[0]",
            "0..1",
        ),
        (
            format!("{attr}range = [0.0, inf]\n"),
            3,
            "attribute[0].range",
            "finite",
        ),
        (
            format!("{attr}opacity = [[0.0, nan]]\n"),
            3,
            "attribute[0].opacity[0]",
            "0..1",
        ),
        (
            format!("{attr}extinction_scale = inf\n"),
            3,
            "attribute[0].extinction_scale",
            "0..1000000000000",
        ),
        (
            format!("{attr}extinction_scale = 3e38\n"),
            3,
            "attribute[0].extinction_scale",
            "0..1000000000000",
        ),
        (
            format!("{attr}emission = nan\n"),
            3,
            "attribute[0].emission",
            "0..10000",
        ),
        (
            format!("{attr}emission = 3e38\n"),
            3,
            "attribute[0].emission",
            "0..10000",
        ),
        (
            format!("{attr}range = [-3e38, 3e38]\n"),
            3,
            "attribute[0].range",
            "span",
        ),
        (
            "[camera]\ntarget = [0.0, nan, 0.0]\n".to_string(),
            2,
            "camera.target[1]",
            "finite",
        ),
        (
            "[overlay]\nplot_window_s = 120.0\n".to_string(),
            2,
            "overlay.plot_window_s",
            "at most 60",
        ),
        (
            "[overlay]\nplot_window_s = inf\n".to_string(),
            2,
            "overlay.plot_window_s",
            "at most 60",
        ),
        (
            "[playback]\nfps = inf\n".to_string(),
            2,
            "playback.fps",
            "≥ 0",
        ),
    ];
    for (text, line, field, needle) in cases {
        check(&err(&text), line, field, needle);
    }
}

#[test]
fn arrays_of_the_wrong_length_name_the_field() {
    let attr = "[[attribute]]\nname = \"cloud\"\n";
    let cases = [
        (
            "[settings]\nsun_color = [1.0, 2.0]\n".to_string(),
            2,
            "settings.sun_color",
        ),
        (
            "[settings]\nsky_zenith = [0.1, 0.2, 0.3, 0.4]\n".to_string(),
            2,
            "settings.sky_zenith",
        ),
        (
            "[camera]\ntarget = [1.0, 2.0]\n".to_string(),
            2,
            "camera.target",
        ),
        (format!("{attr}range = [0.0]\n"), 3, "attribute[0].range"),
        (
            format!("{attr}opacity = [[0.0, 0.5, 1.0]]\n"),
            3,
            "attribute[0].opacity[0]",
        ),
        (
            format!("{attr}colormap = [[0.0, [1.0, 1.0]]]\n"),
            3,
            "attribute[0].colormap[0][1]",
        ),
    ];
    for (text, line, field) in cases {
        let e = err(&text);
        assert_eq!(e.line, Some(line), "{text}: {e}");
        assert_eq!(e.field.as_deref(), Some(field), "{text}: {e}");
        assert!(e.message.contains("length"), "{text}: {e}");
    }
}

/// The validator and the renderer share their limits: a scene at the edge of every range
/// reaches the uniform block unchanged, and one step beyond is refused.
#[test]
fn accepted_settings_reach_the_renderer_unclamped() {
    let text = "[settings]
step_tau = 1.0
step_voxels = 0.01
shadow_tau_max = 80.0
shadow_steps = 65536
max_step_scale = 64
iso_attribute = 7
ground_albedo = 1.0
";
    let s = Scene::parse(text, Path::new("scenes/edge.toml")).unwrap();
    let mut view = View::new([[0.0; 3], [1.0; 3]], 2.0, Vec::new(), 1.0);
    view.settings = s.settings.clone();
    let p = view.gpu_params(8, 8);
    assert_eq!(p.step_tau, 1.0);
    assert_eq!(p.dt, 0.01 * 2.0);
    assert_eq!(p.shadow_tau_max, 80.0);
    assert_eq!(p.shadow_steps, 65536);
    assert_eq!(p.max_step_scale, 64);
    assert_eq!(p.iso_attr, 7);
    assert_eq!(p.ground[2], 1.0);
    for (line, beyond) in [
        (2, "step_tau = 1.0001"),
        (3, "step_voxels = 0.0099"),
        (4, "shadow_tau_max = 80.01"),
        (5, "shadow_steps = 65537"),
        (6, "max_step_scale = 65"),
        (7, "iso_attribute = 8"),
        (8, "ground_albedo = 1.01"),
    ] {
        let key = beyond.split(' ').next().unwrap();
        let changed: String = text
            .lines()
            .map(|l| {
                if l.starts_with(&format!("{key} ")) {
                    beyond.to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        check(&err(&changed), line, &format!("settings.{key}"), "found");
    }
}

#[test]
fn a_colormap_of_the_wrong_shape_says_what_a_colormap_is() {
    check(
        &err("[[attribute]]\nname = \"cloud\"\ncolormap = 5\n"),
        3,
        "attribute[0].colormap",
        "expected a colormap name (cloud, ",
    );
}

#[test]
fn values_are_spelled_as_on_the_command_line() {
    let text = "[playback]\nmode = \"ping-pong\"\n[settings]\nmode = \"iso\"\n";
    let s = Scene::parse(text, Path::new("scenes/new.toml")).unwrap();
    assert_eq!(s.playback.mode, PlayMode::PingPong);
    assert_eq!(s.settings.mode, supercell::render::Mode::Isosurface);
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
}

#[test]
fn old_spellings_load_with_a_warning_naming_the_new_one() {
    let text = "# old\n[playback]\nfps = 12.0\nmode = \"ping_pong\"\n\n[settings]\nmode = \"isosurface\"\n";
    let s = Scene::parse(text, Path::new("scenes/old.toml")).unwrap();
    assert_eq!(s.playback.mode, PlayMode::PingPong);
    assert_eq!(s.settings.mode, supercell::render::Mode::Isosurface);
    let shown: Vec<String> = s.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(
        shown[0].starts_with("scenes/old.toml:4:8: playback.mode: \"ping_pong\" is the old spelling: write \"ping-pong\""),
        "{shown:?}"
    );
    assert!(
        shown[1].starts_with(
            "scenes/old.toml:7:8: settings.mode: \"isosurface\" is the old spelling: write \"iso\""
        ),
        "{shown:?}"
    );
    // The shipped scenes use the new spellings.
    for entry in std::fs::read_dir(repo().join("scenes")).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "toml") {
            let s = Scene::load(&p).unwrap();
            assert!(s.warnings.is_empty(), "{}: {:?}", p.display(), s.warnings);
        }
    }
}

#[test]
fn a_dataset_without_a_scene_gets_looks_from_its_data_and_a_level_set_only_without_fog() {
    use supercell::dataset::{AttributeSpec, DatasetWriter, LaneSpec, Provenance};
    use supercell::format::{BuildOptions, GridClass, LeafBrick, SparseVolume, build_grid};
    use supercell::render::Mode;
    let tmp = tempfile::tempdir().unwrap();
    let grid = |name: &str, class: GridClass, value: f32| {
        let mut brick = LeafBrick::filled([0, 0, 0], 0.0);
        for n in 0..512 {
            brick.set_active(n, value + (n % 7) as f32);
        }
        let volume = SparseVolume {
            background: 0.0,
            bricks: vec![brick],
        };
        let opts = BuildOptions {
            name: name.into(),
            grid_class: class,
            ..BuildOptions::default()
        };
        build_grid(&volume, &opts).unwrap()
    };
    let write = |dir: &str, grids: &[(&str, GridClass, f32)]| {
        let ds = tmp.path().join(dir);
        let specs = grids.iter().map(|g| AttributeSpec::new(g.0)).collect();
        let mut w = DatasetWriter::create(
            &ds,
            LaneSpec::Count(1),
            1 << 20,
            specs,
            Provenance::default(),
        )
        .unwrap();
        w.push_frame(0.0, grids.iter().map(|g| grid(g.0, g.1, g.2)).collect())
            .unwrap();
        w.finish().unwrap();
        ds
    };
    // Reflectivity is structure: shown, and the level set is not drawn beside it.
    let ds = write(
        "with_fog",
        &[
            ("dbz", GridClass::FogVolume, 10.0),
            ("surface", GridClass::LevelSet, -3.0),
        ],
    );
    let ls = Scene::load(&ds).unwrap().open(1.0, None).unwrap();
    assert_eq!(ls.slots, vec![Some(0)]);
    assert_eq!(ls.view.settings.mode, Mode::Shaded);
    let s = ls.suggestion.as_ref().expect("looks from the data");
    assert_eq!(s.attributes[0].range, Some([5.0, 75.0]));
    assert_eq!(s.sample.first_data, [Some(0), Some(0)]);
    let t = s.mean_transmittance.expect("calibrated on the first view");
    assert!(
        (supercell::scene::BAND[0]..=supercell::scene::BAND[1]).contains(&t),
        "mean transmittance {t}"
    );
    // Alone, the level set is drawn as the isosurface.
    let ds = write("surface_only", &[("surface", GridClass::LevelSet, -3.0)]);
    let ls = Scene::load(&ds).unwrap().open(1.0, None).unwrap();
    assert_eq!(ls.slots, vec![Some(0)]);
    assert_eq!(ls.view.settings.mode, Mode::Isosurface);
    assert_eq!(ls.view.settings.iso_attribute, 0);
    // Named on the command line, the attributes keep the default settings.
    let ls = Scene::load(&ds)
        .unwrap()
        .open(1.0, Some(&["surface".to_string()]))
        .unwrap();
    assert_eq!(ls.view.settings.mode, Mode::Shaded);
}

/// With a nested grid (the funnel's, 4 times finer), steps are given in the coarsest shown
/// grid's voxels (the march refines them inside the finer grid): the funnel does not slow
/// the march of the whole storm.
#[test]
fn the_base_step_follows_the_coarsest_grid_shown() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("nested");
    SmallStorm {
        resolution: 24,
        frames: 2,
        lanes: 1,
        chunk: 1 << 20,
        attributes: Some(&[Attribute::Cloud, Attribute::FunnelCloud]),
        made_by: "scene test",
    }
    .write(&ds);
    let coarse = supercell::synth::DOMAIN_WIDTH_M / 24.0;
    let f = tmp.path().join("s.toml");
    let scene = |names: &[&str]| {
        let mut text = "dataset = \"nested\"\n".to_string();
        for n in names {
            text += &format!("\n[[attribute]]\nname = \"{n}\"\n");
        }
        std::fs::write(&f, text).unwrap();
        Scene::load(&f).unwrap().open(1.0, None).unwrap()
    };
    let ls = scene(&["cloud", "funnel_cloud"]);
    assert_eq!(ls.slots, vec![Some(0), Some(1)]);
    let v = ls.view.voxel_size;
    assert!((v - coarse).abs() < 1e-3 * coarse, "{v} vs {coarse}");
    let v = scene(&["funnel_cloud"]).view.voxel_size;
    let fine = coarse / supercell::synth::NEST_REFINEMENT as f32;
    assert!((v - fine).abs() < 1e-3 * fine, "{v} vs {fine}");
}

/// Anisotropic voxels (WRF's 10 km columns, 250 m levels): the voxel unit, which steps are
/// given in, is the smallest edge, so rays crossing the thin levels sample every one; the
/// camera frames the world box the stretched voxels span.
#[test]
fn the_voxel_unit_of_anisotropic_voxels_is_their_smallest_edge() {
    use supercell::dataset::{AttributeSpec, DatasetWriter, LaneSpec, Provenance};
    use supercell::format::{BuildOptions, LeafBrick, SparseVolume, build_grid};
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("stretched");
    let mut brick = LeafBrick::filled([0, 0, 0], 0.0);
    for n in 0..512 {
        brick.set_active(n, 1.0 + (n % 5) as f32);
    }
    let opts = BuildOptions {
        name: "qcloud".into(),
        voxel_size: [10000.0, 10000.0, 250.0],
        ..BuildOptions::default()
    };
    let volume = SparseVolume {
        background: 0.0,
        bricks: vec![brick],
    };
    let mut w = DatasetWriter::create(
        &ds,
        LaneSpec::Count(1),
        1 << 20,
        vec![AttributeSpec::new("qcloud")],
        Provenance::default(),
    )
    .unwrap();
    w.push_frame(0.0, vec![build_grid(&volume, &opts).unwrap()])
        .unwrap();
    w.finish().unwrap();
    let ls = Scene::load(&ds).unwrap().open(1.0, None).unwrap();
    assert_eq!(ls.view.voxel_size, 250.0);
    let [lo, hi] = ls.view.world_bbox;
    let (dx, dz) = (hi[0] - lo[0], hi[2] - lo[2]);
    assert!((dx / dz - 40.0).abs() < 1e-3, "world box {lo:?}..{hi:?}");
    for n in 0..8 {
        let pick = |k: usize, bit: usize| if n & bit != 0 { hi[k] } else { lo[k] };
        let p = glam::Vec3::new(pick(0, 4), pick(1, 2), pick(2, 1));
        assert!(ls.view.camera.sees(p, 1.0), "corner {p} out of view");
    }
}
