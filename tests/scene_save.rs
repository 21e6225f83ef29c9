//! A look edited in the player (colormap, range, opacity curve) and a moved camera, saved as
//! a scene file: a player of that file, and `supercell render` of it, show the player's
//! picture byte for byte (on lavapipe here, on any adapter in CI).
//!
//! Without a GPU adapter the test prints why and passes, unless `SUPERCELL_REQUIRE_GPU` is
//! set (CI sets it).

use std::process::Command;
use std::time::{Duration, Instant};

mod play_support;
mod storm_support;
use play_support::{bin, dataset, gpu, out_dir, read_png, small_config};

use supercell::app::Player;
use supercell::render::Colormap;
use supercell::scene::Scene;

/// Ticks until frame `frame` is shown and the view as changed since has been rendered (a
/// changed view renders on the next tick; then a tick renders nothing).
fn shown_and_rendered(player: &mut Player, frame: u32) {
    player.scrub(frame);
    let end = Instant::now() + Duration::from_secs(120);
    while player.shown_frame() != Some(frame) || player.scrub_pending() {
        assert!(Instant::now() < end, "frame {frame} was not shown");
        if player.tick().expect("tick").shown.is_none() {
            player.wait(Duration::from_millis(2));
        }
    }
    while player.tick().expect("tick").rendered {
        assert!(Instant::now() < end, "frame {frame} renders on and on");
    }
}

#[test]
fn a_saved_scene_shows_the_players_picture_byte_for_byte() {
    let Some(g) = gpu() else { return };
    let ds = dataset();
    let cfg = small_config();
    let mut player = Player::new(&g.device, &g.queue, &ds, &cfg).expect("player");
    player.set_playing(false);
    shown_and_rendered(&mut player, 3);
    let untouched = player.read_image().expect("image").rgba8;

    // The panel's edits: turbo, a narrower range, a point added to the opacity curve and
    // one moved (values that are not short decimals, to test that f32s survive the file).
    let mut tf = player.view().attributes[0].as_ref().unwrap().tf.clone();
    tf.colormap = Colormap::Named("turbo".into());
    tf.range = [tf.range[0], tf.range[1] * 0.613_251_3];
    tf.opacity = vec![(0.02, 0.0), (0.111_111_1, 0.37), (0.6, 0.9), (1.0, 1.0)];
    player.set_look(0, tf.clone()).expect("look");
    let mut rain = player.view().attributes[1].as_ref().unwrap().tf.clone();
    rain.colormap = Colormap::Named("nws_reflectivity".into());
    player.set_look(1, rain).expect("look");
    // An attribute shown from the window (a slot the scene did not have: its extinction is
    // the preset's over the world box at the time, which the saved scene must reproduce)
    // and one hidden.
    let extra = (player.dataset_attributes().iter())
        .position(|(name, shown)| !shown && name == "vorticity")
        .expect("the storm has vorticity");
    player
        .set_dataset_attribute_shown(extra, true)
        .expect("show");
    player.set_attribute_shown(2, false).expect("hide");
    player.view_mut().camera.orbit(23.0, 7.5);
    player.view_mut().camera.zoom(1.17);
    shown_and_rendered(&mut player, 3);
    let edited = player.read_image().expect("image").rgba8;
    assert_ne!(edited, untouched, "the edit shows at once");

    let dir = out_dir().join("scene-save");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("saved.toml");
    let saved = player.save_scene(Some(&file)).expect("save");
    assert_eq!(saved.path, file);
    assert!(!saved.kept_camera_path);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("colormap = \"turbo\""), "{text}");
    let scene = Scene::load(&file).expect("the scene loads and validates");
    assert_eq!(scene.playback.start_frame, 3, "{text}");

    // A player of the file.
    let mut again = Player::new(&g.device, &g.queue, &file, &cfg).expect("player of the file");
    again.set_playing(false);
    shown_and_rendered(&mut again, 3);
    assert_eq!(again.view().attributes[0].as_ref().unwrap().tf, tf);
    assert_eq!(again.view().attributes, player.view().attributes);
    assert_eq!(again.attribute_names(), player.attribute_names());
    assert_eq!(again.view().camera, player.view().camera);
    let replayed = again.read_image().expect("image").rgba8;
    assert!(
        replayed == edited,
        "the saved scene's player shows another picture"
    );

    // `supercell render` of the file.
    let out = Command::new(bin())
        .args(["render", file.to_str().unwrap(), "--frame", "3", "--size"])
        .arg(format!("{}x{}", cfg.width, cfg.height))
        .arg("--out")
        .arg(&dir)
        .output()
        .expect("run render");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (w, h, rgb) = read_png(&dir.join("frame_00003.png"));
    assert_eq!((w, h), (cfg.width, cfg.height));
    let edited_rgb: Vec<u8> = edited
        .chunks_exact(4)
        .flat_map(|p| [p[0], p[1], p[2]])
        .collect();
    assert!(
        rgb == edited_rgb,
        "`render` of the saved scene shows another picture"
    );

    // Without a path: a dataset played alone saves beside it; a scene file is written back.
    let beside = ds.parent().unwrap();
    let (to, replaced) = player.scene_file_to_save();
    assert!(!replaced && to.parent() == Some(beside), "{}", to.display());
    assert!(
        to.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("storm48x8.scene")
    );
    assert_eq!(again.scene_file_to_save(), (file.clone(), true));
    let mut cividis = again.view().attributes[0].as_ref().unwrap().tf.clone();
    cividis.colormap = Colormap::Named("cividis".into());
    again.set_look(0, cividis).expect("look");
    let back = again.save_scene(None).expect("save back");
    assert!(back.replaced && back.path == file, "{back:?}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("colormap = \"cividis\""), "{text}");
    player.drain(Duration::from_secs(5));
    again.drain(Duration::from_secs(5));
}

/// A scene with a camera path keeps its path and its own camera when saved (the path's keys
/// are relative to that camera), and says so.
#[test]
fn a_camera_path_is_kept_with_the_scenes_camera() {
    let Some(g) = gpu() else { return };
    let dir = out_dir().join("scene-save-path");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("flight.toml");
    std::fs::write(
        &file,
        format!(
            "dataset = {:?}\n[camera]\nyaw_deg = -40.0\n[camera_path]\nduration_s = 9.0\n\
             [[camera_path.key]]\ntime_s = 0.0\n[[camera_path.key]]\ntime_s = 4.0\n\
             yaw_deg = 30.0\n",
            dataset().to_str().unwrap()
        ),
    )
    .unwrap();
    let mut player = Player::new(&g.device, &g.queue, &file, &small_config()).expect("player");
    player.view_mut().camera.orbit(10.0, 0.0);
    let saved = player
        .save_scene(Some(&dir.join("saved.toml")))
        .expect("save");
    assert!(saved.kept_camera_path && !saved.replaced, "{saved:?}");
    assert!(saved.describe().contains("camera path was kept"));
    let (was, now) = (
        Scene::load(&file).unwrap(),
        Scene::load(&saved.path).unwrap(),
    );
    assert_eq!(now.camera, was.camera);
    assert_eq!(now.camera_path, was.camera_path);
    player.drain(Duration::from_secs(5));
}
