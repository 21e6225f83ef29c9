//! `supercell render --mode path --converge N` on a small storm (lavapipe in CI): the
//! reference's two halves, one row per doubling of samples up to a quarter of the
//! reference's, relMSE raw and denoised against the reference, and the first row under the
//! target, in the JSON it writes. (Its figures on the H200 are in docs/PERFORMANCE.md.)

mod play_support;
mod storm_support;

use play_support::{bin, dataset, gpu, out_dir};

#[test]
fn converge_writes_a_row_per_doubling_with_errors_that_fall() {
    if gpu().is_none() {
        return;
    }
    let out = out_dir().join("converge");
    let _ = std::fs::remove_dir_all(&out);
    let json = out.join("c.json");
    let run = std::process::Command::new(bin())
        .args(["render", dataset().to_str().unwrap()])
        .args(["--frame", "5", "--mode", "path", "--size", "48x27"])
        .args(["--converge", "16", "--out", out.to_str().unwrap()])
        .args(["--converge-json", json.to_str().unwrap()])
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{said}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["reference_spp"].as_u64(), Some(16), "{v}");
    let rows = v["rows"].as_array().unwrap();
    let spp: Vec<u64> = rows.iter().map(|r| r["spp"].as_u64().unwrap()).collect();
    assert_eq!(spp, vec![1, 2, 4], "{v}");
    let raw: Vec<f64> = rows
        .iter()
        .map(|r| r["rel_mse"].as_f64().unwrap())
        .collect();
    // Four times the samples: clearly less error against the reference.
    assert!(raw[2] < raw[0], "{raw:?}");
    for r in rows {
        let (s, t) = (
            r["seconds"].as_f64().unwrap(),
            r["denoise_seconds"].as_f64().unwrap(),
        );
        assert!(s > 0.0 && t > 0.0, "{r}");
        // The corrected figure takes the reference's own noise off, never below zero.
        let c = r["rel_mse_corrected"].as_f64().unwrap();
        assert!(c >= 0.0 && c <= r["rel_mse"].as_f64().unwrap(), "{r}");
    }
    // The table and the firsts are said on stdout too.
    assert!(said.contains("relMSE (raw)"), "{said}");
}
