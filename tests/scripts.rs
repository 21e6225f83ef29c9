//! The shell and Python scripts shipped in `scripts/`: they parse, they use nothing from
//! outside the repository (a clone reproduces the GPU figures with `scripts/rig/`), and the
//! raw reader peer counts every byte of the files it reads.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn scripts() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for dir in ["scripts", "scripts/rig"] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "sh" || x == "py") {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

#[test]
fn scripts_parse() {
    for p in scripts() {
        let out = if p.extension().is_some_and(|x| x == "sh") {
            Command::new("bash").arg("-n").arg(&p).output()
        } else {
            Command::new("python3")
                .args(["-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())"])
                .arg(&p)
                .output()
        };
        let Ok(out) = out else {
            eprintln!("skipping {}: no interpreter", p.display());
            continue;
        };
        assert!(
            out.status.success(),
            "{}: {}",
            p.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_gpu_run_uses_only_what_the_repository_carries() {
    let text = std::fs::read_to_string(repo().join("scripts/gpu-tests.sh")).unwrap();
    for outside in ["../shared", ".dev/device"] {
        assert!(
            !text.contains(outside),
            "scripts/gpu-tests.sh uses {outside}, which a clone does not have"
        );
    }
    // Every rig script it names exists.
    let mut named = 0;
    for (i, _) in text.match_indices("scripts/rig/") {
        let rest = &text[i..];
        let end = rest
            .find(|c: char| c.is_whitespace() || c == '"' || c == ')' || c == ',')
            .unwrap_or(rest.len());
        let path = rest[..end].trim_end_matches(['.', ';', ':']);
        if path.ends_with('/') {
            continue;
        }
        assert!(
            repo().join(path).is_file(),
            "scripts/gpu-tests.sh names {path}, which is missing"
        );
        named += 1;
    }
    assert!(named >= 4, "scripts/gpu-tests.sh names {named} rig scripts");
}

#[test]
fn raw_peer_reads_every_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let sizes = [3 * 1024 * 1024 + 123, 1024 * 1024, 77];
    let files: Vec<PathBuf> = sizes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let p = tmp.path().join(format!("f{i}"));
            std::fs::write(&p, vec![i as u8; *n]).unwrap();
            p
        })
        .collect();
    let peers = repo().join("scripts/rig/peers.py");
    for direct in [false, true] {
        let mut c = Command::new("python3");
        c.arg(&peers)
            .args(["raw", "--threads", "3", "--chunk-mib", "1"]);
        if direct {
            c.arg("--direct");
        }
        let Ok(out) = c.args(&files).output() else {
            eprintln!("skipping: no python3");
            return;
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        // O_DIRECT is refused by some file systems (tmpfs); plain reads are not.
        if direct && !out.status.success() && stderr.contains("Invalid argument") {
            eprintln!("skipping O_DIRECT here: {stderr}");
            continue;
        }
        assert!(out.status.success(), "{stdout}{stderr}");
        let total: usize = sizes.iter().sum();
        assert!(
            stdout.contains(&format!(" bytes={total} ")),
            "wanted bytes={total}: {stdout}"
        );
        assert!(stdout.starts_with("peer=raw"), "{stdout}");
        assert!(Path::new(&peers).is_file());
    }
}
