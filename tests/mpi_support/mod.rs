//! What the tests run under `mpirun` share (tests/mpi_bench.rs, tests/mpi_play.rs, and supercell-data's
//! tests/mpi_convert.rs by path).
#![allow(dead_code)]

use std::process::Command;

/// Whether `mpirun` runs here; where it does not, says why the caller skips, or fails
/// where SUPERCELL_REQUIRE_CROSSCHECK is set (CI installs Open MPI).
pub fn have_mpirun() -> bool {
    let ok = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("SUPERCELL_REQUIRE_CROSSCHECK").is_none(),
            "mpirun is missing (Debian: openmpi-bin)"
        );
        eprintln!("skipped: mpirun is not installed (Debian: openmpi-bin)");
    }
    ok
}

/// The pid of the process of `rank` that runs `command` (a word of its command line, such
/// as `bench`) on `dir`, once mpirun started it: for the tests that stop one rank.
pub fn rank_pid(dir: &std::path::Path, command: &str, rank: u32) -> Option<u32> {
    let want = format!("OMPI_COMM_WORLD_RANK={rank}");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let has = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
        if has(&cmdline, dir.as_os_str().as_encoded_bytes())
            && has(&cmdline, command.as_bytes())
            && environ.split(|&b| b == 0).any(|v| v == want.as_bytes())
        {
            return Some(pid);
        }
    }
    None
}

/// `bin` under `mpirun -n ranks` (as root, oversubscribed: the tests run more ranks than
/// cores), or `bin` alone for `None`, with its own XDG_RUNTIME_DIR (`runtime`, under the
/// temporary directory) as the Vulkan drivers want one.
pub fn launch(ranks: Option<u32>, bin: &str, runtime: &str) -> Command {
    launch_exporting(ranks, bin, runtime, &[])
}

/// [`launch`], with mpirun exporting the variables `exported` to every rank (`-x VAR`, as
/// on a cluster: a window's DISPLAY).
pub fn launch_exporting(
    ranks: Option<u32>,
    bin: &str,
    runtime: &str,
    exported: &[&str],
) -> Command {
    let mut cmd = match ranks {
        Some(n) => {
            let mut c = Command::new("mpirun");
            c.args(["--allow-run-as-root", "--oversubscribe"]);
            for v in exported {
                c.args(["-x", v]);
            }
            c.args(["-n", &n.to_string(), bin]);
            c
        }
        None => Command::new(bin),
    };
    let dir = std::env::temp_dir().join(runtime);
    std::fs::create_dir_all(&dir).unwrap();
    cmd.env("XDG_RUNTIME_DIR", dir);
    cmd
}
