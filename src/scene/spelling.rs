//! One spelling per value: a scene file spells a value the way the command line does
//! (kebab-case, e.g. `mode = "ping-pong"` as `--mode ping-pong`). Files written with an
//! older spelling still load; each old spelling gets a warning naming the file, the place
//! and the spelling to write instead.

use toml::de::{DeTable, DeValue};

use super::SceneError;
use super::error::{Seg, Source};

/// A value whose spelling changed: at field `path`, `old` is now written `new`.
struct Renamed {
    path: &'static [&'static str],
    old: &'static str,
    new: &'static str,
}

/// Every renamed value. The types accept both spellings (serde aliases); this list is what
/// makes the old ones audible.
const RENAMED: &[Renamed] = &[
    // `supercell play --mode ping-pong`.
    Renamed {
        path: &["playback", "mode"],
        old: "ping_pong",
        new: "ping-pong",
    },
    // `supercell render --mode iso` (with `--iso`, `iso_value` and `iso_attribute`).
    Renamed {
        path: &["settings", "mode"],
        old: "isosurface",
        new: "iso",
    },
];

/// Warnings for the old spellings in `src`, each at its value's line and column.
pub(super) fn old_spellings(src: &Source) -> Vec<SceneError> {
    let Ok(doc) = DeTable::parse(&src.text) else {
        return Vec::new();
    };
    let mut warnings = Vec::new();
    for r in RENAMED {
        let mut table = Some(doc.get_ref());
        let mut value = None;
        for key in r.path {
            let Some(t) = table else { break };
            value = t.iter().find(|(k, _)| k.get_ref() == key).map(|(_, v)| v);
            table = value.and_then(|v| v.get_ref().as_table());
        }
        if let Some(v) = value
            && let DeValue::String(s) = v.get_ref()
            && s.as_ref() == r.old
        {
            let path: Vec<Seg> = r.path.iter().map(|k| Seg::Key((*k).into())).collect();
            let mut w = src.error_at_path(
                &path,
                format!(
                    "{:?} is the old spelling: write {:?}, as the command line does (the old one still works for now)",
                    r.old, r.new
                ),
            );
            let (line, column) = src.line_col(v.span().start);
            (w.line, w.column) = (Some(line), Some(column));
            warnings.push(w);
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The types must accept both spellings of every renamed value.
    #[test]
    fn both_spellings_parse() {
        for r in RENAMED {
            let [table, key] = r.path else {
                panic!("renamed values are two levels deep")
            };
            for v in [r.old, r.new] {
                let text = format!("[{table}]\n{key} = {v:?}\n");
                let src = Source {
                    file: "t.toml".into(),
                    text: text.clone(),
                };
                let warned = old_spellings(&src);
                assert_eq!(warned.len(), usize::from(v == r.old), "{text}");
                let s = super::super::Scene::parse(&text, "t.toml".as_ref())
                    .unwrap_or_else(|e| panic!("{text}: {e}"));
                assert_eq!(s.warnings, warned);
            }
        }
    }
}
