//! The player's path tracing: M switches it on and off, the picture refines while paused up
//! to its cap and starts afresh on a camera change or another frame, playback gets only the
//! bounded samples per frame, and the overlay names the samples.
//!
//! Without a GPU adapter the tests print why and pass, unless `SUPERCELL_REQUIRE_GPU` is set
//! (CI sets it).

use std::time::{Duration, Instant};

mod play_support;
mod storm_support;
use play_support::{dataset, gpu};

use supercell::app::overlay::{UiState, dump};
use supercell::app::script::{Action, key_action};
use supercell::app::{PathSel, Player, PlayerConfig};
use supercell::render::Mode;

fn small_config() -> PlayerConfig {
    PlayerConfig {
        width: 48,
        height: 32,
        path: PathSel::Host,
        threads: 2,
        ..PlayerConfig::default()
    }
}

fn run_until(player: &mut Player, what: &str, mut done: impl FnMut(&Player) -> bool) {
    let end = Instant::now() + Duration::from_secs(120);
    while !done(player) {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        if player.tick().expect("tick").shown.is_none() {
            player.wait(Duration::from_millis(2));
        }
    }
}

#[test]
fn m_is_the_path_tracing_key_and_n_the_denoiser_key() {
    assert_eq!(key_action("m"), Some(Action::TogglePathTracing));
    assert_eq!(key_action("M"), Some(Action::TogglePathTracing));
    assert_eq!(key_action("n"), Some(Action::ToggleDenoise));
    assert_eq!(key_action("N"), Some(Action::ToggleDenoise));
}

/// N shows the converged picture raw or denoised at once, from the same samples: the picture
/// changes, no samples are added or dropped, the overlay says which, and N again brings the
/// denoised picture back exactly.
#[test]
fn n_switches_the_denoiser_on_the_converged_picture() {
    let Some(g) = gpu() else { return };
    let ds = dataset();
    let mut player = Player::new(&g.device, &g.queue, &ds, &small_config()).expect("player");
    player.set_playing(false);
    player.scrub(3);
    run_until(&mut player, "frame 3", |p| {
        !p.scrub_pending() && p.shown_frame() == Some(3)
    });
    player.toggle_path_tracing();
    player.view_mut().settings.path_samples_per_frame = 2;
    player.view_mut().settings.path_max_samples = 4;
    run_until(&mut player, "converged", |p| {
        p.tracer_state() == Some("converged")
    });
    assert!(player.tracer_denoise(), "path mode starts denoised");
    let ui = UiState::new((1280, 720));
    let line = |p: &Player| {
        dump(p, &ui)
            .lines
            .into_iter()
            .find(|l| l.starts_with("render: path"))
            .expect("a render line")
    };
    assert!(line(&player).ends_with("denoised"), "{}", line(&player));
    let denoised = player.read_image().expect("image").rgba8;

    assert!(!player.toggle_denoise().expect("N"));
    let raw = player.read_image().expect("image").rgba8;
    assert_eq!(
        player.tracer_samples(),
        4,
        "N adds no samples and drops none"
    );
    assert!(line(&player).contains("raw"), "{}", line(&player));
    let changed = denoised.iter().zip(&raw).filter(|(a, b)| a != b).count();
    assert!(
        changed * 10 > raw.len(),
        "the raw mean of 4 samples differs from the denoised picture in over a tenth of the bytes \
         ({changed} of {})",
        raw.len()
    );
    // Converged: later ticks render nothing, and the raw picture stays.
    for _ in 0..10 {
        player.tick().expect("tick");
    }
    assert_eq!(player.read_image().expect("image").rgba8, raw);

    assert!(player.toggle_denoise().expect("N again"));
    assert_eq!(
        player.read_image().expect("image").rgba8,
        denoised,
        "N again shows the same denoised picture"
    );
}

#[test]
fn path_tracing_toggles_refines_when_paused_and_restarts_on_changes() {
    let Some(g) = gpu() else { return };
    let ds = dataset();
    let mut player = Player::new(&g.device, &g.queue, &ds, &small_config()).expect("player");
    let scene_mode = player.render_mode();
    assert_ne!(scene_mode, Mode::Path, "the small storm's scene marches");
    assert_eq!(
        player.tracer_state(),
        None,
        "no path figures outside path mode"
    );
    let mut ui = UiState::new((1280, 720));
    ui.compact = false;
    assert!(
        dump(&player, &ui)
            .lines
            .iter()
            .any(|l| l.contains("render: shaded")),
        "the overlay names the render mode"
    );

    // Paused on frame 2, path tracing: the picture refines to the cap and stops there.
    player.set_playing(false);
    player.scrub(2);
    run_until(&mut player, "frame 2", |p| {
        !p.scrub_pending() && p.shown_frame() == Some(2)
    });
    assert_eq!(player.toggle_path_tracing(), Mode::Path);
    assert_eq!(player.render_mode(), Mode::Path);
    player.view_mut().settings.path_samples_per_frame = 2;
    player.view_mut().settings.path_max_samples = 12;
    run_until(&mut player, "8 samples", |p| p.tracer_samples() >= 8);
    assert!(
        player.tracer_samples_per_second() > 0.0,
        "the refinement's rate is measured"
    );
    run_until(&mut player, "converged", |p| {
        p.tracer_state() == Some("converged")
    });
    assert_eq!(player.tracer_samples(), 12, "refined exactly to the cap");
    for _ in 0..20 {
        player.tick().expect("tick");
        player.wait(Duration::from_millis(2));
    }
    assert_eq!(player.tracer_samples(), 12, "no samples past the cap");
    let d = dump(&player, &ui);
    assert_eq!(d.render_mode, "path");
    assert_eq!(d.path_samples, Some(12));
    assert_eq!(d.path_state.as_deref(), Some("converged"));
    assert!(
        d.lines
            .iter()
            .any(|l| l.contains("render: path   12 / 12 spp") && l.contains("spp/s")),
        "the overlay names the samples: {:?}",
        d.lines
    );

    // A camera change starts the picture afresh, and it refines to the cap again.
    player.view_mut().camera.orbit(10.0, 0.0);
    assert_eq!(player.tracer_state(), Some("view changing"));
    player.tick().expect("tick");
    assert_eq!(
        player.tracer_samples(),
        2,
        "a camera change restarts the picture"
    );
    run_until(&mut player, "12 samples again", |p| {
        p.tracer_samples() == 12
    });

    // Another frame starts it afresh too.
    player.scrub(5);
    run_until(&mut player, "frame 5", |p| p.shown_frame() == Some(5));
    assert_eq!(
        player.tracer_samples(),
        2,
        "another frame restarts the picture"
    );
    run_until(&mut player, "12 samples on frame 5", |p| {
        p.tracer_samples() == 12
    });

    // Playing (slowly, so that ticks pass between frames): each shown frame gets the
    // samples of one render only, so playback is not held up refining.
    player.set_speed(Some(0.5));
    player.set_playing(true);
    assert_eq!(player.tracer_state(), Some("playing"));
    run_until(&mut player, "the next frame", |p| {
        p.shown_frame() != Some(5)
    });
    let start = player.figures(PathSel::Host).frames_rendered;
    let end = Instant::now() + Duration::from_secs(120);
    while player.figures(PathSel::Host).frames_rendered < start + 2 {
        assert!(Instant::now() < end, "timed out playing 2 frames");
        let out = player.tick().expect("tick");
        assert!(
            !out.rendered || out.shown.is_some(),
            "playback spent a render refining ({} samples)",
            player.tracer_samples()
        );
        assert!(player.tracer_samples() <= 2, "playback refined");
        if out.shown.is_none() {
            player.wait(Duration::from_millis(2));
        }
    }

    // M again: back to the scene's mode.
    assert_eq!(player.toggle_path_tracing(), scene_mode);
    assert_eq!(player.tracer_state(), None);
}
