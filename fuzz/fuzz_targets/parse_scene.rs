//! Fuzzes the scene parser and validator: any text must give a scene or a located error,
//! never a panic. A scene that validates must also reach the renderer unchanged: packing its
//! settings into the uniform block clamps nothing, and its camera and camera path evaluate.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use supercell::render::View;
use supercell::scene::Scene;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let scene = match Scene::parse(text, Path::new("/nonexistent/fuzz.toml")) {
        Ok(s) => s,
        Err(e) => {
            // Formatting walks the located line and column.
            let _ = e.to_string();
            return;
        }
    };
    let world = [[-1000.0, -1000.0, 0.0], [1000.0, 1000.0, 500.0]];
    let fitted = scene.camera.resolve(world, 16.0 / 9.0);
    let mut view = View::new(world, 10.0, Vec::new(), 16.0 / 9.0);
    view.settings = scene.settings.clone();
    view.camera = fitted;
    let p = view.gpu_params(64, 36);
    let s = &scene.settings;
    assert_eq!(p.step_tau, s.step_tau, "step_tau clamped");
    assert_eq!(p.shadow_tau_max, s.shadow_tau_max, "shadow_tau_max clamped");
    assert_eq!(p.shadow_steps, s.shadow_steps, "shadow_steps clamped");
    assert_eq!(p.max_step_scale, s.max_step_scale, "max_step_scale clamped");
    assert_eq!(
        p.iso_attr as usize, s.iso_attribute,
        "iso_attribute clamped"
    );
    assert_eq!(p.dt, s.step_voxels * 10.0, "step_voxels clamped");
    if let Some(path) = &scene.camera_path {
        let d = path.duration_s();
        for t in [0.0, d * 0.37, d, d * 2.5 + 1.0, -3.0] {
            let _ = path.at(t, &fitted);
        }
    }
});
