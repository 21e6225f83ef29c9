//! `render --movie`: the frames encoded by the system's ffmpeg, checked with ffprobe and
//! ffmpeg's own decoder (frame count, size, rate; decoded pixels against the PNGs written in
//! the same run, legend included with `--annotate`), the camera flying the scene's path at
//! `--fps` (each frame equal to a single render at that path time), and the refusals that
//! leave no file behind.
//!
//! Skipped with a printed reason where no GPU adapter (lavapipe in CI) or no ffmpeg is
//! present, unless `SUPERCELL_REQUIRE_GPU` / `SUPERCELL_REQUIRE_CROSSCHECK` demand them.

mod play_support;
mod render_support;
mod storm_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use render_support::{gpu, out_dir, small_storm, supercell_command};

const W: u32 = 64;
const H: u32 = 48;

fn tool(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A three-frame storm and a scene on it whose camera path turns 90° in one second.
fn scene(dir: &Path) -> PathBuf {
    let cloud = vec![supercell::synth::Attribute::Cloud];
    small_storm(&dir.join("data"), 32, 3, cloud, "movie test");
    let toml = r#"dataset = "data"

[[attribute]]
name = "cloud"

[camera_path]
looped = false

[[camera_path.key]]
time_s = 0.0
yaw_deg = -90.0
pitch_deg = 20.0

[[camera_path.key]]
time_s = 1.0
yaw_deg = 0.0
pitch_deg = 20.0
"#;
    let path = dir.join("scene.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

fn run(cmd: &mut Command) -> (bool, String, String) {
    let o = cmd.output().expect("run supercell render");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn decode_rgb(ffmpeg: &Path, movie: &Path) -> Vec<u8> {
    let o = Command::new(ffmpeg)
        .args(["-v", "error", "-i"])
        .arg(movie)
        .args(["-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        .output()
        .expect("ffmpeg decodes");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o.stdout
}

fn png_rgb(path: &Path) -> Vec<u8> {
    let (w, h, rgb) = play_support::read_png(path);
    assert_eq!((w, h), (W, H), "{}", path.display());
    rgb
}

#[test]
fn movie_frames_fly_the_camera_path_and_decode_to_the_pngs() {
    let Some(gpu) = gpu() else { return };
    drop(gpu);
    let (Some(ffmpeg), Some(ffprobe)) = (tool("ffmpeg"), tool("ffprobe")) else {
        assert!(
            std::env::var_os("SUPERCELL_REQUIRE_CROSSCHECK").is_none(),
            "ffmpeg and ffprobe are required (apt install ffmpeg)"
        );
        eprintln!("SKIPPED: no ffmpeg/ffprobe on PATH (apt install ffmpeg)");
        return;
    };
    let dir = out_dir().join("movie");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let scene = scene(&dir);
    let movie = dir.join("storm.mp4");
    let size = format!("{W}x{H}");
    let (ok, stdout, stderr) = run(supercell_command()
        .arg("render")
        .arg(&scene)
        .args([
            "--frames",
            "0..3",
            "--size",
            &size,
            "--fps",
            "2",
            "--annotate",
            "--out",
        ])
        .arg(dir.join("frames"))
        .arg("--movie")
        .arg(&movie));
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stderr.contains("on the scene's camera path"), "{stderr}");
    assert!(stdout.lines().any(|l| l.ends_with("storm.mp4")), "{stdout}");
    assert!(movie.is_file());
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // ffprobe: one H.264 (or MPEG-4) stream of three 64x48 frames at 2 frames/s.
    let o = Command::new(&ffprobe)
        .args([
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-count_frames",
            "-show_entries",
        ])
        .arg("stream=codec_name,width,height,r_frame_rate,nb_read_frames")
        .args(["-of", "default=noprint_wrappers=1"])
        .arg(&movie)
        .output()
        .unwrap();
    let probe = String::from_utf8_lossy(&o.stdout);
    for want in [
        "width=64",
        "height=48",
        "r_frame_rate=2/1",
        "nb_read_frames=3",
    ] {
        assert!(probe.contains(want), "ffprobe: {probe} (wanted {want})");
    }
    assert!(
        probe.contains("codec_name=h264") || probe.contains("codec_name=mpeg4"),
        "{probe}"
    );

    // Decoded frames against the PNGs of the same run: lossy, so compare means.
    let decoded = decode_rgb(&ffmpeg, &movie);
    let frame_bytes = (W * H * 3) as usize;
    assert_eq!(decoded.len(), 3 * frame_bytes);
    let pngs: Vec<Vec<u8>> = (0..3)
        .map(|f| png_rgb(&dir.join(format!("frames/frame_{f:05}.png"))))
        .collect();
    for (f, png) in pngs.iter().enumerate() {
        let got = &decoded[f * frame_bytes..(f + 1) * frame_bytes];
        let mean: f64 = got
            .iter()
            .zip(png)
            .map(|(a, b)| (f64::from(*a) - f64::from(*b)).abs())
            .sum::<f64>()
            / frame_bytes as f64;
        assert!(
            mean < 6.0,
            "frame {f}: decoded differs from its PNG by {mean:.2} on average"
        );
    }

    // The camera flies: frame k is the render at path time k / 2 s, and the turn shows.
    for (k, png) in pngs.iter().enumerate() {
        let single = dir.join(format!("single{k}"));
        let t = format!("{}", k as f64 / 2.0);
        let (ok, _, stderr) = run(supercell_command()
            .arg("render")
            .arg(&scene)
            .args([
                "--frame",
                &k.to_string(),
                "--size",
                &size,
                "--path-time",
                &t,
                "--annotate",
            ])
            .arg("--out")
            .arg(&single));
        assert!(ok, "{stderr}");
        let one = png_rgb(&single.join(format!("frame_{k:05}.png")));
        assert_eq!(
            &one, png,
            "movie frame {k} is the render at path time {t} s"
        );
    }
    assert_ne!(
        pngs[0], pngs[2],
        "the camera turned between the first and last frame"
    );
}

#[test]
fn movie_refusals_leave_no_file() {
    let dir = out_dir().join("movie-refused");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let movie = dir.join("m.mp4");
    // No such ffmpeg: refused before the scene opens or anything renders, naming it.
    let (ok, _, stderr) = run(supercell_command()
        .args(["render", "no-such-scene.toml", "--movie"])
        .arg(&movie)
        .args(["--ffmpeg", "/nonexistent/ffmpeg"]));
    assert!(!ok);
    assert!(stderr.contains("/nonexistent/ffmpeg"), "{stderr}");
    // Not an .mp4 name; a folder that does not exist; a bad rate; with --bench.
    for (args, expect) in [
        (vec!["--movie", "m.avi"], "NAME.mp4"),
        (vec!["--movie", "/nonexistent/dir/m.mp4"], "no such folder"),
        (vec!["--movie", "m.mp4", "--fps", "0"], "--fps"),
        (vec!["--movie", "m.mp4", "--bench"], "cannot be used with"),
        (vec!["--fps", "24"], "--movie"),
    ] {
        let (ok, _, stderr) = run(supercell_command()
            .arg("render")
            .arg(dir.join("absent"))
            .args(&args));
        assert!(!ok, "{args:?} should fail");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
    }
    assert!(!movie.exists());
}

/// An ffmpeg that quits while frames are being fed fails the run with what it said, and
/// leaves neither the movie nor its temporary file behind.
#[test]
fn an_encoder_that_quits_fails_the_run_and_leaves_no_file() {
    use std::os::unix::fs::PermissionsExt;
    let Some(gpu) = gpu() else { return };
    drop(gpu);
    let dir = out_dir().join("movie-encoder-quits");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let scene = scene(&dir);
    // Offers libx264 when asked, then refuses to encode.
    let fake = dir.join("ffmpeg");
    std::fs::write(
        &fake,
        "#!/bin/sh\ncase \"$*\" in *-encoders*) echo ' V..... libx264 H.264'; exit 0;; esac\n\
         echo 'no space left for the movie' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let movie = dir.join("m.mp4");
    let (ok, _, stderr) = run(supercell_command()
        .arg("render")
        .arg(&scene)
        .args(["--frames", "0..3", "--size", "64x48", "--out"])
        .arg(dir.join("frames"))
        .arg("--movie")
        .arg(&movie)
        .arg("--ffmpeg")
        .arg(&fake));
    assert!(!ok, "{stderr}");
    assert!(stderr.contains("no space left for the movie"), "{stderr}");
    assert!(!movie.exists());
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
