//! What the cross-checks against other writers share: running a writer script from
//! tests/crosscheck (exit status 3: its library is missing), skipping with the reason where
//! that is allowed (a failure where `SUPERCELL_REQUIRE_CROSSCHECK` is set, as in CI), and
//! reading the sample points the script reports.

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use supercell::format::Coord;

/// Prints why cross-check `test` is skipped, or fails it where cross-checks are required.
pub fn skip(test: &str, reason: &str) {
    if std::env::var_os("SUPERCELL_REQUIRE_CROSSCHECK").is_some() {
        panic!("{test}: cross-check required but cannot run: {reason}");
    }
    println!("SKIPPED {test}: {reason}");
    eprintln!("SKIPPED {test}: {reason}");
}

/// Runs `python script dir` (a script in tests/crosscheck) and returns the JSON it wrote to
/// `dir/json_name`; `None` after reporting the skip where the interpreter cannot run or the
/// script says its library is missing (`missing` tells the user what to install).
pub fn run_writer(
    test: &str,
    python: &str,
    script: &str,
    dir: &Path,
    json_name: &str,
    missing: &str,
) -> Option<serde_json::Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/crosscheck")
        .join(script);
    match Command::new(python).arg(path).arg(dir).status() {
        Err(e) => {
            skip(test, &format!("cannot run {python}: {e}"));
            return None;
        }
        Ok(s) if s.code() == Some(3) => {
            skip(test, missing);
            return None;
        }
        Ok(s) => assert!(s.success(), "{script} failed"),
    }
    let text = std::fs::read_to_string(dir.join(json_name)).unwrap();
    Some(serde_json::from_str(&text).unwrap())
}

/// A JSON array of numbers.
pub fn floats(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// The index coordinates in the script's `points` array.
pub fn points(json: &serde_json::Value) -> Vec<Coord> {
    json["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let c: Vec<i32> = p
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_i64().unwrap() as i32)
                .collect();
            [c[0], c[1], c[2]]
        })
        .collect()
}
