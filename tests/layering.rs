//! The layering of `src/` that docs/ARCHITECTURE.md describes, checked on the source text:
//! which top-level module may import which (the table below has no cycle, so no module
//! imports one that imports it back), which external crates a layer must not see (the
//! renderer knows nothing of egui or winit, the ingest engines nothing of wgpu), that no
//! two files of one module import each other, and that no source file grows past
//! 1,200 lines.
//!
//! A new import across modules fails here until the table (and the architecture document)
//! says it is allowed; the test then also checks that the new edge makes no cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of the library and the modules it may import (`crate::X`).
const ALLOWED: &[(&str, &[&str])] = &[
    ("probe", &[]),
    ("stderr_log", &[]),
    ("atomic_file", &[]),
    ("crc32", &[]),
    ("units", &[]),
    ("cluster", &[]),
    ("device", &[]),
    ("memory", &["probe"]),
    ("format", &["atomic_file", "memory"]),
    ("dataset", &["cluster", "format", "memory"]),
    (
        "synth",
        &["cluster", "dataset", "format", "memory", "probe"],
    ),
    ("gpu", &["crc32", "device", "memory", "probe"]),
    ("ingest", &["crc32", "dataset", "gpu", "memory", "probe"]),
    ("pipeline", &["probe"]),
    ("stream", &["gpu", "ingest", "pipeline"]),
    ("render", &["device", "format", "memory", "probe"]),
    (
        "scene",
        &["dataset", "format", "pipeline", "probe", "render", "synth"],
    ),
    (
        "bench",
        &[
            "cluster", "dataset", "gpu", "ingest", "memory", "pipeline", "probe", "stream", "units",
        ],
    ),
    (
        "doctor",
        &[
            "dataset", "device", "gpu", "ingest", "memory", "probe", "render",
        ],
    ),
    ("settings", &["gpu", "ingest", "render"]),
    (
        "app",
        &[
            "atomic_file",
            "cluster",
            "crc32",
            "dataset",
            "device",
            "format",
            "gpu",
            "ingest",
            "memory",
            "pipeline",
            "probe",
            "render",
            "scene",
            "stream",
            "synth",
            "units",
        ],
    ),
];

/// External crates a module must not name.
const FORBIDDEN_CRATES: &[(&str, &[&str])] = &[
    ("format", &["wgpu", "cudarc", "egui", "winit", "io_uring"]),
    ("dataset", &["wgpu", "cudarc", "egui", "winit"]),
    ("synth", &["wgpu", "cudarc", "egui", "winit"]),
    ("pipeline", &["wgpu", "cudarc", "egui", "winit", "io_uring"]),
    ("ingest", &["wgpu", "egui", "winit"]),
    ("stream", &["wgpu", "egui", "winit"]),
    ("gpu", &["egui", "winit"]),
    ("device", &["cudarc", "egui", "winit"]),
    ("render", &["cudarc", "egui", "winit", "io_uring"]),
    ("scene", &["cudarc", "egui", "winit"]),
    ("settings", &["egui", "winit"]),
];

/// What library code must not do: read (or set) the environment, or print. The binary reads
/// the environment once (through `settings`, docs/SETTINGS.md) and passes values in; the
/// library returns notes and reports that the binary prints.
const FORBIDDEN_CALLS: &[&str] = &[
    "env::var",
    "env::set_var",
    "env::remove_var",
    "eprintln!",
    "println!",
    "eprint!",
    "print!",
    "dbg!",
];

/// Library files allowed one of [`FORBIDDEN_CALLS`], and why. Test code (`#[cfg(test)]`
/// items and the files of `#[cfg(test)] mod x;`) is not checked.
const ENV_AND_PRINT_EXCEPTIONS: &[(&str, &str, &str)] = &[
    // Diagnosing what other libraries read is doctor's job: the Vulkan loader's driver list
    // and cuFile's configuration file come from these variables, not from supercell's
    // settings, and doctor reports them as that process would see them.
    (
        "doctor/gpu.rs",
        "env::var",
        "reports VK_DRIVER_FILES / CUFILE_ENV_PATH_JSON",
    ),
    // `~/` in a scene file's paths means the home directory, as a shell would expand it
    // (tests/scene.rs pins it). Passing HOME in needs a parameter on the scene parser,
    // which another branch is changing now: left for after that merge (issue 29, item 1).
    ("scene/error.rs", "env::var", "HOME for ~/ in scene paths"),
    // The logger the binaries install: the one place library notes reach stderr, and only
    // in a process whose binary installed it.
    (
        "stderr_log.rs",
        "eprintln!",
        "the installed logger's output",
    ),
];

const MAX_LINES: usize = 1200;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source without comments (line comments and doc comments), so prose that names a
/// module is not an import.
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            // A `//` inside a string literal ("http://…") is rare in this code base; a
            // line whose code part has an odd number of quotes before it keeps its text.
            Some(i) if l[..i].matches('"').count() % 2 == 0 => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Names `X` that follow `prefix` (`crate::X`, `super::X`, `supercell::X`).
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            out.extend(group_heads(group));
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

/// The first segment of each item of a `use` group (`{a::X, b, c::{D, E}}` → a, b, c):
/// `group` starts after the opening brace.
fn group_heads(group: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let (mut depth, mut item_start) = (0usize, true);
    let mut name = String::new();
    let flush = |name: &mut String, out: &mut BTreeSet<String>| {
        if !name.is_empty() && name != "self" {
            out.insert(name.clone());
        }
        name.clear();
    };
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                flush(&mut name, &mut out);
                item_start = true;
            }
            c if item_start && (c.is_ascii_alphanumeric() || c == '_') => name.push(c),
            _ if item_start && !name.is_empty() => {
                flush(&mut name, &mut out);
                item_start = false;
            }
            _ => {}
        }
    }
    flush(&mut name, &mut out);
    out
}

/// The top-level module a file belongs to (`None`: lib.rs, main.rs, cmd/).
fn top_module(path: &Path) -> Option<String> {
    let rel = path.strip_prefix(src()).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.trim_end_matches(".rs").to_string();
    (!matches!(name.as_str(), "lib" | "main" | "cmd")).then_some(name)
}

fn allowed() -> BTreeMap<&'static str, BTreeSet<&'static str>> {
    ALLOWED
        .iter()
        .map(|(m, deps)| (*m, deps.iter().copied().collect()))
        .collect()
}

#[test]
fn the_allowed_imports_have_no_cycle() {
    let table = allowed();
    // Kahn's algorithm: a table with a cycle leaves modules that never become free.
    let mut left: BTreeMap<&str, BTreeSet<&str>> = table.clone();
    let mut order = Vec::new();
    while !left.is_empty() {
        let free: Vec<&str> = left
            .iter()
            .filter(|(_, deps)| deps.iter().all(|d| !left.contains_key(d)))
            .map(|(m, _)| *m)
            .collect();
        assert!(
            !free.is_empty(),
            "the allowed imports form a cycle among {:?}",
            left.keys().collect::<Vec<_>>()
        );
        for m in free {
            left.remove(m);
            order.push(m);
        }
    }
    for deps in table.values() {
        for d in deps {
            assert!(table.contains_key(d), "{d} is allowed but not a module");
        }
    }
}

#[test]
fn every_module_imports_only_what_the_layering_allows() {
    let table = allowed();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut seen_modules = BTreeSet::new();
    let mut wrong = Vec::new();
    for file in &files {
        let Some(module) = top_module(file) else {
            continue;
        };
        seen_modules.insert(module.clone());
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let Some(may) = table.get(module.as_str()) else {
            wrong.push(format!(
                "{}: module {module} is not in the layering table",
                file.display()
            ));
            continue;
        };
        for name in names_after(&code, "crate::") {
            if name != module && table.contains_key(name.as_str()) && !may.contains(name.as_str()) {
                wrong.push(format!(
                    "{}: {module} imports crate::{name}",
                    file.display()
                ));
            }
        }
        let forbidden = FORBIDDEN_CRATES
            .iter()
            .find(|(m, _)| *m == module)
            .map_or(&[][..], |(_, c)| c);
        for krate in forbidden {
            let pattern = format!("{krate}::");
            if names_after(&code, &pattern).iter().next().is_some() {
                wrong.push(format!("{}: {module} names {krate}", file.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
    // The check above looked at every module of the table (a renamed module would
    // otherwise pass by never being read).
    for m in table.keys() {
        assert!(seen_modules.contains(*m), "no source files for module {m}");
    }
}

/// Per directory of `root`: file stem → the sibling stems it imports through `super::`, and
/// in `root` itself through `crate::` (`mod.rs`, `lib.rs` and `main.rs` are the module
/// itself, not siblings).
fn sibling_imports(root: &Path) -> BTreeMap<(PathBuf, String), BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let mut imports = BTreeMap::new();
    for file in &files {
        let stem = file.file_stem().unwrap().to_str().unwrap().to_string();
        if matches!(stem.as_str(), "mod" | "lib" | "main") {
            continue;
        }
        let dir = file.parent().unwrap().to_path_buf();
        let siblings: BTreeSet<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter_map(|p| {
                let s = p.file_stem()?.to_str()?.to_string();
                (p.is_dir() || p.extension().is_some_and(|e| e == "rs")).then_some(s)
            })
            .filter(|s| s != "mod" && *s != stem)
            .collect();
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let mut used = names_after(&code, "super::");
        if dir == root {
            used.extend(names_after(&code, "crate::"));
        }
        used.retain(|n| siblings.contains(n));
        imports.insert((dir, stem), used);
    }
    imports
}

/// The groups of files that import each other, directly or around a longer loop (strongly
/// connected components of more than one file), as sorted stems per directory.
fn import_cycles(
    imports: &BTreeMap<(PathBuf, String), BTreeSet<String>>,
) -> Vec<(PathBuf, Vec<String>)> {
    // Reachability by depth-first search from every file: few files per directory.
    let reach = |dir: &PathBuf, from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(f) = stack.pop() {
            for g in imports.get(&(dir.clone(), f)).into_iter().flatten() {
                if seen.insert(g.clone()) {
                    stack.push(g.clone());
                }
            }
        }
        seen
    };
    let mut groups: BTreeSet<(PathBuf, Vec<String>)> = BTreeSet::new();
    for (dir, a) in imports.keys() {
        let from_a = reach(dir, a);
        if !from_a.contains(a) {
            continue;
        }
        let mut group: Vec<String> = from_a
            .iter()
            .filter(|b| reach(dir, b).contains(a))
            .cloned()
            .collect();
        group.sort();
        groups.insert((dir.clone(), group));
    }
    groups.into_iter().collect()
}

#[test]
fn no_files_of_a_module_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cycles = Vec::new();
    for base in [src(), root.join("data-tools/src")] {
        for (dir, group) in import_cycles(&sibling_imports(&base)) {
            let d = dir.strip_prefix(root).unwrap().display().to_string();
            let d = d.strip_prefix("src/").unwrap_or(&d).to_string();
            let names: Vec<String> = group.iter().map(|s| format!("{d}/{s}")).collect();
            cycles.push(names.join(" -> "));
        }
    }
    assert!(
        cycles.is_empty(),
        "files that import each other (directly or around a loop):\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_cycle_check_sees_loops_of_three() {
    let d = PathBuf::from("m");
    let edge = |a: &str, b: &[&str]| {
        (
            (d.clone(), a.to_string()),
            b.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>(),
        )
    };
    let imports: BTreeMap<_, _> = [
        edge("core", &["path"]),
        edge("path", &["route"]),
        edge("route", &["core"]),
        edge("leaf", &["core"]),
    ]
    .into_iter()
    .collect();
    let cycles = import_cycles(&imports);
    assert_eq!(
        cycles,
        vec![(
            d.clone(),
            vec!["core".into(), "path".into(), "route".into()]
        )]
    );
}

#[test]
fn no_source_file_is_over_the_line_limit() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The tests and the supercell-data tool are held to the same limit.
    for dir in ["tests", "data-tools/src", "data-tools/tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > MAX_LINES).then(|| format!("{}: {n} lines", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// `code` less every item marked `#[cfg(test)]` (the attribute and the item after it: to
/// its `;` or its braces' end). Braces inside string literals are assumed balanced, as
/// format strings are.
fn without_test_items(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        let item = &rest[i + "#[cfg(test)]".len()..];
        let (mut depth, mut end) = (0usize, item.len());
        for (k, c) in item.char_indices() {
            match c {
                ';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The files of modules declared `#[cfg(test)] mod x;` (`x.rs` and everything under `x/`),
/// relative to `src/`.
fn test_only_paths(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for file in files {
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let stem = file.file_stem().unwrap().to_str().unwrap();
        let dir = if matches!(stem, "mod" | "lib" | "main") {
            file.parent().unwrap().to_path_buf()
        } else {
            file.parent().unwrap().join(stem)
        };
        let mut rest = code.as_str();
        while let Some(i) = rest.find("#[cfg(test)]") {
            rest = &rest[i + "#[cfg(test)]".len()..];
            let item = rest.trim_start();
            let Some(decl) = item.strip_prefix("mod ") else {
                continue;
            };
            let name: String = decl
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if decl[name.len()..].trim_start().starts_with(';') {
                out.insert(dir.join(format!("{name}.rs")));
                out.insert(dir.join(&name));
            }
        }
    }
    out
}

/// Where `call` occurs in `code` as a call of its own (`print!` not inside `eprint!` or
/// `sprint!`, `env::var` also as `env::var_os`).
fn calls(code: &str, call: &str) -> usize {
    code.match_indices(call)
        .filter(|(i, _)| {
            let before = code[..*i].chars().last();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
        .count()
}

#[test]
fn library_code_reads_no_environment_and_prints_nothing() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let test_only = test_only_paths(&files);
    let mut wrong = Vec::new();
    let mut used_exceptions = BTreeSet::new();
    for file in &files {
        if top_module(file).is_none() || test_only.iter().any(|t| file.starts_with(t)) {
            continue;
        }
        let rel = file.strip_prefix(src()).unwrap().display().to_string();
        let code = without_test_items(&code_of(&std::fs::read_to_string(file).unwrap()));
        for call in FORBIDDEN_CALLS {
            if calls(&code, call) == 0 {
                continue;
            }
            if ENV_AND_PRINT_EXCEPTIONS
                .iter()
                .any(|(f, c, _)| *f == rel && c == call)
            {
                used_exceptions.insert((rel.clone(), *call));
            } else {
                wrong.push(format!("src/{rel}: {call}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "library code that reads the environment or prints (return a value or a note for \
         the binary to print; settings go in src/settings.rs):\n{}",
        wrong.join("\n")
    );
    for (f, c, _) in ENV_AND_PRINT_EXCEPTIONS {
        assert!(
            used_exceptions.contains(&(f.to_string(), *c)),
            "stale exception: src/{f} no longer uses {c}"
        );
    }
}

#[test]
fn the_env_and_print_check_sees_calls_and_skips_test_code() {
    let code = code_of(
        "fn a() { eprintln!(\"x {y}\"); }\n#[cfg(test)]\nmod tests {\n fn b() { println!(\"{}\", 1); }\n}\n#[cfg(test)]\nuse std::env::var;\nfn c() { std::env::var_os(\"K\"); } // println!",
    );
    let lib = without_test_items(&code);
    assert_eq!(calls(&lib, "eprintln!"), 1);
    assert_eq!(calls(&lib, "println!"), 0);
    assert_eq!(calls(&lib, "env::var"), 1);
    assert_eq!(calls(&lib, "print!"), 0);
    assert_eq!(calls("sprint!(x); print!(y)", "print!"), 1);
}

#[test]
fn the_checks_see_imports_and_ignore_prose() {
    let code = code_of(
        "use crate::gpu::Ring; // crate::app in a comment\n/// [`crate::render`]\nlet x = a_crate::b;",
    );
    let names = names_after(&code, "crate::");
    assert_eq!(names, BTreeSet::from(["gpu".to_string()]));
    // Grouped imports name every head: `super::{movie, watchdog}`, nested groups.
    let grouped =
        code_of("use super::{movie, render::{Args, Mode}, watchdog};\nuse super::{self as up};");
    assert_eq!(
        names_after(&grouped, "super::"),
        BTreeSet::from([
            "movie".to_string(),
            "render".to_string(),
            "watchdog".to_string()
        ])
    );
}
