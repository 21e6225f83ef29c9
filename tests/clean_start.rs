//! What a user sees when the binary starts: no false error from the Vulkan drivers where
//! there is no login session (`XDG_RUNTIME_DIR` unset or unusable: ssh, cron, a systemd
//! unit), a warning naming the file for a scene's old spelling of a value, and scene files
//! accepting every value the command line takes, spelled the same way.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use supercell::scene::Scene;
mod storm_support;

use storm_support::SmallStorm;
use supercell::synth::Attribute;

const BIN: &str = env!("CARGO_BIN_EXE_supercell");

fn tiny_dataset(dir: &Path) {
    SmallStorm {
        resolution: 24,
        frames: 1,
        lanes: 1,
        chunk: 1 << 20,
        attributes: Some(&[Attribute::Cloud]),
        made_by: "clean start test",
    }
    .write(dir);
}

/// `supercell render SCENE` at a tiny size, with `XDG_RUNTIME_DIR` as given (None: unset).
fn render(scene: &Path, out: &Path, runtime_dir: Option<&str>) -> Output {
    let mut c = Command::new(BIN);
    c.args(["render", "--size", "16x9", "--out"])
        .arg(out)
        .arg(scene);
    match runtime_dir {
        Some(v) => c.env("XDG_RUNTIME_DIR", v),
        None => c.env_remove("XDG_RUNTIME_DIR"),
    };
    c.output().expect("run supercell")
}

/// Whether a render run found no GPU adapter (then the test is skipped, unless
/// `SUPERCELL_REQUIRE_GPU` is set).
fn no_adapter(o: &Output) -> bool {
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() && err.to_lowercase().contains("adapter") {
        assert!(
            std::env::var_os("SUPERCELL_REQUIRE_GPU").is_none(),
            "no GPU adapter and SUPERCELL_REQUIRE_GPU is set: {err}"
        );
        eprintln!("skipping: {err}");
        return true;
    }
    false
}

#[test]
fn no_runtime_dir_complaint_without_a_session() {
    let tmp = tempfile::tempdir().unwrap();
    tiny_dataset(&tmp.path().join("storm"));
    let scene = tmp.path().join("tiny.toml");
    std::fs::write(&scene, "dataset = \"storm\"\n").unwrap();
    let open_dir = tmp.path().join("shared-run");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let open_dir = open_dir.to_str().unwrap().to_string();
    // Unset (ssh without a login manager, cron, systemd units), empty, relative, and a
    // directory others can write to (not private, so not valid).
    for value in [
        None,
        Some(""),
        Some("relative/run"),
        Some(open_dir.as_str()),
    ] {
        let out = render(&scene, &tmp.path().join("out"), value);
        if no_adapter(&out) {
            return;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "XDG_RUNTIME_DIR={value:?}: {err}");
        assert!(
            !err.contains("XDG_RUNTIME_DIR"),
            "XDG_RUNTIME_DIR={value:?}: a false error on stderr:\n{err}"
        );
    }
}

#[test]
fn an_old_spelling_warns_with_the_file_and_the_new_spelling() {
    let tmp = tempfile::tempdir().unwrap();
    tiny_dataset(&tmp.path().join("storm"));
    let scene = tmp.path().join("old.toml");
    std::fs::write(
        &scene,
        "dataset = \"storm\"\n[playback]\nmode = \"ping_pong\"\n",
    )
    .unwrap();
    let out = render(&scene, &tmp.path().join("out"), None);
    if no_adapter(&out) {
        return;
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let want = format!(
        "warning: {}:3:8: playback.mode: \"ping_pong\" is the old spelling: write \"ping-pong\"",
        scene.display()
    );
    assert!(err.contains(&want), "wanted {want:?} in:\n{err}");
}

/// The values `supercell SUBCOMMAND -h` lists for `--FLAG`.
fn possible_values(subcommand: &str, flag: &str) -> Vec<String> {
    let out = Command::new(BIN)
        .args([subcommand, "-h"])
        .output()
        .expect("run supercell");
    let help = String::from_utf8_lossy(&out.stdout);
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let at = flat
        .find(&format!("{flag} <"))
        .unwrap_or_else(|| panic!("{subcommand} -h has no {flag}:\n{help}"));
    let rest = &flat[at..];
    let start = rest.find("[possible values: ").expect("possible values") + 18;
    let end = start + rest[start..].find(']').unwrap();
    rest[start..end].split(", ").map(str::to_string).collect()
}

#[test]
fn scene_files_take_the_command_lines_values() {
    let cases = [
        ("play", "--mode", "playback", "mode"),
        ("render", "--mode", "settings", "mode"),
    ];
    for (subcommand, flag, table, key) in cases {
        let values = possible_values(subcommand, flag);
        assert!(values.len() >= 3, "{subcommand} {flag}: {values:?}");
        for v in values {
            let text = format!("[{table}]\n{key} = {v:?}\n");
            let s = Scene::parse(&text, Path::new("v.toml")).unwrap_or_else(|e| {
                panic!("`{subcommand} {flag} {v}` has no scene spelling {table}.{key}: {e}")
            });
            assert!(s.warnings.is_empty(), "{text}: {:?}", s.warnings);
        }
    }
}
