use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use super::*;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k: &str| map.get(k).cloned()
}

#[test]
fn nothing_set_gives_the_defaults() {
    let env = env_of(&[]);
    assert_eq!(render_config(&env).unwrap(), RenderConfig::default());
    let t = ingest_tuning(&env).unwrap();
    assert_eq!((t.part_bytes, t.host_pages), (None, HostPages::Huge));
    assert!(t.faults.is_none());
    assert!(player_denoise(&env).unwrap());
    assert_eq!(cache_base(&env), None);
}

#[test]
fn every_render_variable_lands_in_its_field() {
    let env = env_of(&[
        ("SUPERCELL_PATH_SAMPLES_PER_DISPATCH", "8"),
        ("SUPERCELL_PATH_QMC_DIMS", " 2 "),
        ("SUPERCELL_PATH_CARRY_DEPTH", "0"),
        ("SUPERCELL_PATH_CELL_CACHE", "1"),
        ("SUPERCELL_PATH_COUNTERS", "always"),
        ("SUPERCELL_PATH_SKIP_LEVELS", "2"),
        ("SUPERCELL_DENOISE_LEVELS", "3"),
        ("SUPERCELL_DENOISE_SIGMA", "4.5"),
        ("SUPERCELL_DENOISE_SIGMA_PER_LEVEL", "0.5"),
        ("SUPERCELL_DENOISE_EPS", "0.01"),
    ]);
    let c = render_config(&env).unwrap();
    assert_eq!(c.samples_per_dispatch, Some(8));
    assert_eq!(c.qmc_dims, 2);
    assert_eq!(
        c.path_knobs,
        TracerKnobs {
            carry_depth: false,
            cache_cells: true,
            always_count: true,
            skip_levels: 2,
        }
    );
    assert_eq!(
        c.denoise,
        DenoiseParams {
            levels: 3,
            sigma: 4.5,
            sigma_per_level: 0.5,
            eps: 0.01,
        }
    );
}

/// Before, a value that did not parse was ignored (the run measured the defaults) or only
/// printed; now it is an error naming the variable and what it takes.
#[test]
fn a_bad_value_is_an_error_naming_the_variable() {
    for (name, value) in [
        ("SUPERCELL_PATH_SAMPLES_PER_DISPATCH", "0"),
        ("SUPERCELL_PATH_SAMPLES_PER_DISPATCH", "four"),
        ("SUPERCELL_PATH_QMC_DIMS", "65"),
        ("SUPERCELL_PATH_CARRY_DEPTH", "2"),
        ("SUPERCELL_PATH_COUNTERS", "sometimes"),
        ("SUPERCELL_PATH_SKIP_LEVELS", "3"),
        ("SUPERCELL_DENOISE_LEVELS", "9"),
        ("SUPERCELL_DENOISE_SIGMA", "-1"),
        ("SUPERCELL_DENOISE_EPS", "NaN"),
    ] {
        let e = render_config(&env_of(&[(name, value)])).unwrap_err();
        assert_eq!((e.name.as_str(), e.value.as_str()), (name, value));
        assert!(e.to_string().starts_with(name), "{e}");
    }
    for (name, value) in [
        ("SUPERCELL_PART_BYTES", "100000"),
        ("SUPERCELL_PART_BYTES", "4096"),
        ("SUPERCELL_HOST_HUGEPAGES", "maybe"),
        ("SUPERCELL_FAULTS", "melt:lane=1"),
    ] {
        let e = ingest_tuning(&env_of(&[(name, value)])).unwrap_err();
        assert_eq!(e.name, name, "{e}");
    }
    assert!(player_denoise(&env_of(&[("SUPERCELL_DENOISE", "of")])).is_err());
}

#[test]
fn ingest_and_player_variables_land_in_their_fields() {
    let env = env_of(&[
        ("SUPERCELL_PART_BYTES", "65536"),
        ("SUPERCELL_HOST_HUGEPAGES", "off"),
        ("SUPERCELL_FAULTS", "eio:lane=1,frame=3"),
        ("SUPERCELL_DENOISE", "off"),
    ]);
    let t = ingest_tuning(&env).unwrap();
    assert_eq!((t.part_bytes, t.host_pages), (Some(65536), HostPages::Base));
    assert!(t.faults.unwrap().has(crate::ingest::FaultKind::Eio));
    assert!(!player_denoise(&env).unwrap());
}

#[test]
fn the_cache_directory_follows_its_variables_in_order() {
    let all = [
        ("SUPERCELL_CACHE", "/c"),
        ("XDG_CACHE_HOME", "/x"),
        ("HOME", "/h"),
    ];
    assert_eq!(cache_base(&env_of(&all)), Some("/c".into()));
    assert_eq!(cache_base(&env_of(&all[1..])), Some("/x/supercell".into()));
    assert_eq!(
        cache_base(&env_of(&all[2..])),
        Some("/h/.cache/supercell".into())
    );
    // Empty counts as unset.
    let blank = [("SUPERCELL_CACHE", ""), ("HOME", "/h")];
    assert_eq!(
        cache_base(&env_of(&blank)),
        Some("/h/.cache/supercell".into())
    );
}

/// Every `SUPERCELL_*` name the sources mention is a row of the table (so a new variable
/// cannot be added without its documentation), and every row's name appears in the sources
/// or the tests (no stale rows).
#[test]
fn the_table_names_every_variable_the_sources_mention() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut mentioned = BTreeSet::new();
    let mut files = Vec::new();
    collect(&root.join("src"), &mut files);
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("SUPERCELL_") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(tail.len());
            let name = &tail[..end];
            // `SUPERCELL_PATH_*` and the like are prose, not names.
            if !name.ends_with('_') {
                mentioned.insert(name.to_string());
            }
            rest = &tail[end..];
        }
    }
    let table: BTreeSet<String> = SETTINGS.iter().map(|s| s.name.to_string()).collect();
    let missing: Vec<_> = mentioned.difference(&table).collect();
    assert!(
        missing.is_empty(),
        "variables named in src/ but not in settings::SETTINGS: {missing:?}"
    );
    let mut tests = Vec::new();
    collect(&root.join("tests"), &mut tests);
    let everywhere: String = files
        .iter()
        .chain(&tests)
        .filter(|f| !f.ends_with("settings.rs"))
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    for s in SETTINGS {
        assert!(
            everywhere.contains(s.name),
            "{} is in the table but nothing reads it",
            s.name
        );
    }
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// docs/SETTINGS.md is the table's rendering; `SUPERCELL_WRITE_SETTINGS=1` rewrites it.
#[test]
fn docs_settings_md_is_the_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/SETTINGS.md");
    let want = markdown();
    if std::env::var_os("SUPERCELL_WRITE_SETTINGS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/SETTINGS.md differs from settings::SETTINGS: run \
         `SUPERCELL_WRITE_SETTINGS=1 cargo test --lib settings::` and commit the file"
    );
}
