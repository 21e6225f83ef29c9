//! `supercell doctor` end to end (CI: no GPU, lavapipe installed): plain JSON, every check
//! complete, lanes on one file system flagged, a missing CUDA reported with its fix, and
//! the Vulkan check naming a software adapter as such.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use supercell::dataset::{AttributeSpec, DatasetWriter, LaneSpec, Provenance};

/// A dataset with two lanes inside its directory (so both on one file system).
fn make_dataset(dir: &Path) {
    let mut w = DatasetWriter::create(
        dir,
        LaneSpec::Count(2),
        64 << 10,
        vec![AttributeSpec::new("density")],
        Provenance::new("doctor test", ["x"]),
    )
    .unwrap();
    for f in 0..3u8 {
        w.push_frame_opaque(f64::from(f), vec![vec![f ^ 0x5a; 200_000]])
            .unwrap();
    }
    w.finish().unwrap();
}

/// Runs `supercell doctor ARGS` (see [`run_doctor`]) and checks it succeeded.
fn doctor(args: &[&str], lavapipe: Option<&Path>) -> Output {
    let out = run_doctor(args, lavapipe);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "doctor failed: {err}");
    out
}

/// Runs `supercell doctor ARGS`, with the software Vulkan driver only where `lavapipe`
/// is given.
fn run_doctor(args: &[&str], lavapipe: Option<&Path>) -> Output {
    let runtime = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_supercell"));
    cmd.arg("doctor")
        .args(args)
        .env("XDG_RUNTIME_DIR", runtime.path());
    if let Some(icd) = lavapipe {
        cmd.env("VK_DRIVER_FILES", icd).env("VK_ICD_FILENAMES", icd);
    }
    let out = cmd.output().expect("run supercell doctor");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "doctor panicked: {err}");
    out
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// Fails on any `Ok`/`Err` key anywhere: results are never serialised as Rust enums.
fn assert_plain(v: &Value, at: &str) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                assert!(k != "Ok" && k != "Err", "{at}.{k} is a Result wrapper");
                assert_plain(x, &format!("{at}.{k}"));
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                assert_plain(x, &format!("{at}[{i}]"));
            }
        }
        _ => {}
    }
}

fn check<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {v:#}"))
}

/// The lavapipe driver file, where Mesa's is installed.
fn lavapipe_icd() -> Option<std::path::PathBuf> {
    std::fs::read_dir("/usr/share/vulkan/icd.d")
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("lvp_icd"))
        })
}

#[test]
fn json_is_plain_complete_and_flags_lanes_sharing_one_device() {
    let dir = tempfile::tempdir().unwrap();
    make_dataset(dir.path());
    let out = doctor(
        &["--json", dir.path().to_str().unwrap()],
        lavapipe_icd().as_deref(),
    );
    let v = json_of(&out);
    assert_plain(&v, "$");
    assert_eq!(v["schema"], "supercell-doctor/1");
    let checks = v["checks"].as_array().unwrap();
    assert!(checks.len() > 10, "{v:#}");
    for c in checks {
        let status = c["status"].as_str().unwrap_or_else(|| panic!("{c}"));
        assert!(["ok", "warn", "fail", "skip"].contains(&status), "{c}");
        assert!(c["name"].as_str().is_some_and(|s| !s.is_empty()), "{c}");
        assert!(c["detail"].as_str().is_some_and(|s| !s.is_empty()), "{c}");
        assert!(c.get("fix").is_some(), "fix key missing: {c}");
        if status == "warn" || status == "fail" {
            assert!(c["fix"].as_str().is_some_and(|s| !s.is_empty()), "{c}");
        }
    }
    // The dataset and both its lanes, each with its device and an O_DIRECT verdict.
    assert_eq!(check(&v, "dataset")["status"], "ok");
    assert_eq!(check(&v, "dataset")["lanes"], 2);
    let dev = std::fs::metadata(dir.path()).unwrap();
    for lane in ["lane.0", "lane.1"] {
        let c = check(&v, lane);
        assert_eq!(
            c["major"].as_u64().unwrap(),
            u64::from(libc::major(std::os::unix::fs::MetadataExt::dev(&dev))),
            "{c}"
        );
        assert!(
            ["works", "refused", "untested"].contains(&c["o_direct"].as_str().unwrap()),
            "{c}"
        );
    }
    // Both lanes live on the temporary directory's file system: one device.
    let s = check(&v, "lanes.sharing");
    assert_eq!(s["status"], "warn", "{s}");
    assert_eq!(
        s["groups"],
        serde_json::json!([["lane.0", "lane.1"]]),
        "{s}"
    );
    assert!(s["fix"].as_str().unwrap().contains("own drive"), "{s}");
    // CUDA: where there is none, a skip (or fail where a GPU is on the bus) with the fix.
    let cuda = check(&v, "cuda.driver");
    if cuda["gpus"] == 0 {
        assert!(
            cuda["status"] == "skip" || cuda["status"] == "fail",
            "{cuda}"
        );
        assert!(cuda["fix"].as_str().is_some(), "{cuda}");
        assert_eq!(check(&v, "cufile.library")["status"], "skip");
        assert_eq!(check(&v, "cuda.vulkan_sharing")["status"], "skip");
    } else {
        assert_eq!(cuda["status"], "ok", "{cuda}");
    }
    for name in ["io_uring", "placement", "nvidia_fs", "cufile.json", "udev"] {
        check(&v, name);
    }
}

#[test]
fn vulkan_check_finds_lavapipe_and_calls_it_software() {
    let Some(icd) = lavapipe_icd() else {
        eprintln!("skipping: Mesa's lavapipe is not installed");
        return;
    };
    let v = json_of(&doctor(&["--json"], Some(&icd)));
    let a = check(&v, "vulkan.adapter");
    assert_eq!(a["software"], true, "{a}");
    assert_eq!(a["status"], "warn", "{a}");
    assert!(a["adapter"].as_str().unwrap().contains("llvmpipe"), "{a}");
    assert!(a["fix"].as_str().is_some(), "{a}");
    let l = check(&v, "vulkan.limits");
    for k in ["max_buffer_size", "max_storage_binding", "max_texture_2d"] {
        assert!(l[k].as_u64().is_some_and(|n| n > 0), "{k}: {l}");
    }
    let x = check(&v, "vulkan.external_memory");
    assert!(
        x["host_import"].is_boolean() && x["fd_export"].is_boolean(),
        "{x}"
    );
}

#[test]
fn text_names_problems_with_fixes_and_json_file_is_written() {
    let dir = tempfile::tempdir().unwrap();
    make_dataset(dir.path());
    let json = dir.path().join("doctor.json");
    let out = run_doctor(
        &[
            &format!("--json={}", json.display()),
            dir.path().to_str().unwrap(),
            "/nonexistent/lane",
        ],
        lavapipe_icd().as_deref(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("lanes.sharing"), "{text}");
    assert!(text.contains("share one device"), "{text}");
    assert!(text.contains("fix: give each lane its own drive"), "{text}");
    assert!(text.contains("CUDA driver"), "{text}");
    // A path that does not exist is a failed check with its fix, and the exit status
    // says a check failed.
    assert!(text.contains("fail  path.0"), "{text}");
    assert!(!out.status.success(), "a failed check exited 0");
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_plain(&v, "$");
    assert_eq!(check(&v, "path.0")["status"], "fail");
}

/// Lanes on two file systems (the temporary directory's and /dev/shm's) are not flagged.
#[test]
fn lanes_on_separate_devices_are_not_flagged() {
    let shm = Path::new("/dev/shm");
    let root = tempfile::tempdir().unwrap();
    let here = root.path().join("lane0");
    std::fs::create_dir(&here).unwrap();
    let Ok(there) = tempfile::tempdir_in(shm) else {
        eprintln!("skipping: no /dev/shm");
        return;
    };
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata(&here).unwrap().dev() == std::fs::metadata(there.path()).unwrap().dev() {
        eprintln!("skipping: /dev/shm is on the temporary directory's file system");
        return;
    }
    let v = json_of(&doctor(
        &[
            "--json",
            here.to_str().unwrap(),
            there.path().to_str().unwrap(),
        ],
        lavapipe_icd().as_deref(),
    ));
    let s = check(&v, "lanes.sharing");
    assert_eq!(s["status"], "ok", "{s}");
    assert_eq!(s["groups"], serde_json::json!([]), "{s}");
    assert_eq!(check(&v, "path.1")["fs"], "tmpfs");
}

/// On the GPU machine (`cargo test --test doctor -- --ignored`): CUDA, its GPUs, sharing
/// with Vulkan and cuFile's mode are all found, and the adapter is the GPU, not software.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn on_a_gpu_machine_cuda_vulkan_and_cufile_are_found() {
    let v = json_of(&doctor(&["--json"], None));
    eprintln!("{v:#}");
    assert_eq!(check(&v, "cuda.driver")["status"], "ok");
    assert_eq!(check(&v, "cuda.gpu.0")["status"], "ok");
    assert_eq!(check(&v, "vulkan.adapter")["software"], false);
    assert_eq!(check(&v, "cuda.vulkan_sharing")["status"], "ok");
    let cufile = check(&v, "cufile.library");
    let mode = cufile["mode"].as_str().unwrap_or("none");
    assert!(
        ["p2p", "p2pdma-advertised", "compat"].contains(&mode),
        "{cufile}"
    );
    // P2P is claimed only with nvidia-fs loaded.
    if mode == "p2p" {
        assert_eq!(check(&v, "nvidia_fs")["loaded"], true);
    }
    assert!(
        !check(&v, "placement")["gpus"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}
