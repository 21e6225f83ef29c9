//! [`SceneError`] and the locator that turns a byte span into a field path and a field path
//! into a line and column.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};

/// A scene that cannot be loaded or opened: where (file, line, column, field) and why.
///
/// Displays as `scenes/storm.toml:12:5: camera_path.key[2].yaw_deg: expected a number,
/// found a string`; parts that are unknown are left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SceneError {
    /// The scene file (or dataset directory) the error is about.
    pub file: PathBuf,
    /// 1-based line in `file`, where known.
    pub line: Option<usize>,
    /// 1-based column (in characters) in `file`, where known.
    pub column: Option<usize>,
    /// Field path, e.g. `camera_path.key[2].yaw_deg`, where known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl SceneError {
    /// An error about `file` as a whole (no line, no field).
    pub fn new(file: impl Into<PathBuf>, message: impl Into<String>) -> SceneError {
        SceneError {
            file: file.into(),
            line: None,
            column: None,
            field: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for SceneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for SceneError {}

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Seg {
    /// A table key.
    Key(String),
    /// An array index.
    Index(usize),
}

/// Formats a path as `a.b[2].c`.
pub(crate) fn path_string(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// The text of a scene file, to locate errors in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Source {
    /// File name shown in errors.
    pub file: PathBuf,
    /// The whole text.
    pub text: String,
}

impl Source {
    /// 1-based line and column (characters) of byte `offset`.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..self.text.floor_char_boundary(offset)];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        (line, before[line_start..].chars().count() + 1)
    }

    /// An error at byte span `span` (its field path found from the document) with `message`.
    pub fn error_at_span(&self, span: Option<Range<usize>>, message: String) -> SceneError {
        let mut e = SceneError::new(&self.file, message);
        if let Some(span) = span {
            let (l, c) = self.line_col(span.start);
            e.line = Some(l);
            e.column = Some(c);
            if let Ok(doc) = DeTable::parse(&self.text) {
                let mut best: Option<(usize, Vec<Seg>)> = None;
                let mut cur = Vec::new();
                search_table(doc.get_ref(), span.start, &mut cur, &mut best);
                if let Some((_, p)) = best
                    && !p.is_empty()
                {
                    e.field = Some(path_string(&p));
                }
            }
        }
        e
    }

    /// An error about field `path` (located in the document: the value's line and column,
    /// or the nearest enclosing entry that exists) with `message`.
    pub fn error_at_path(&self, path: &[Seg], message: impl Into<String>) -> SceneError {
        let mut e = SceneError::new(&self.file, message);
        e.field = Some(path_string(path));
        if let Ok(doc) = DeTable::parse(&self.text)
            && let Some(span) = locate(doc.get_ref(), path)
        {
            let (l, c) = self.line_col(span.start);
            e.line = Some(l);
            e.column = Some(c);
        }
        e
    }
}

fn contains(span: &Range<usize>, at: usize) -> bool {
    span.start <= at && at < span.end.max(span.start + 1)
}

fn consider(span: Range<usize>, at: usize, path: &[Seg], best: &mut Option<(usize, Vec<Seg>)>) {
    if contains(&span, at) {
        let len = span.end.saturating_sub(span.start);
        if best.as_ref().is_none_or(|(l, _)| len <= *l) {
            *best = Some((len, path.to_vec()));
        }
    }
}

/// Finds the smallest key or value span holding `at`, anywhere in the document (table
/// spans in TOML need not enclose their entries, so every node is visited).
fn search_table(
    t: &DeTable<'_>,
    at: usize,
    cur: &mut Vec<Seg>,
    best: &mut Option<(usize, Vec<Seg>)>,
) {
    for (k, v) in t.iter() {
        cur.push(Seg::Key(k.get_ref().to_string()));
        consider(k.span(), at, cur, best);
        consider(v.span(), at, cur, best);
        search_value(v.get_ref(), at, cur, best);
        cur.pop();
    }
}

fn search_value(
    v: &DeValue<'_>,
    at: usize,
    cur: &mut Vec<Seg>,
    best: &mut Option<(usize, Vec<Seg>)>,
) {
    match v {
        DeValue::Table(t) => search_table(t, at, cur, best),
        DeValue::Array(a) => {
            for (i, item) in a.iter().enumerate() {
                cur.push(Seg::Index(i));
                consider(item.span(), at, cur, best);
                search_value(item.get_ref(), at, cur, best);
                cur.pop();
            }
        }
        _ => {}
    }
}

/// Span of the value at `path`, or of the deepest existing prefix (its key when the value
/// is a table, since a table's span may be its header only).
fn locate(doc: &DeTable<'_>, path: &[Seg]) -> Option<Range<usize>> {
    let mut found: Option<Range<usize>> = None;
    let mut table = Some(doc);
    let mut array: Option<&[toml::Spanned<DeValue<'_>>]> = None;
    for seg in path {
        let next = match (seg, table, array) {
            (Seg::Key(k), Some(t), _) => t
                .iter()
                .find(|(key, _)| key.get_ref() == k)
                .map(|(key, v)| (key.span(), v)),
            (Seg::Index(i), _, Some(a)) => a.get(*i).map(|v| (v.span(), v)),
            _ => None,
        };
        let Some((key_span, v)) = next else { break };
        found = Some(match v.get_ref() {
            DeValue::Table(_) | DeValue::Array(_) if v.span().is_empty() => key_span,
            _ => v.span(),
        });
        table = v.get_ref().as_table();
        array = v.get_ref().as_array().map(|a| &a[..]);
    }
    found
}

/// Rewrites serde's type-error wording into the scene format's: `invalid type: string
/// "x", expected f32` becomes `expected a number, found a string`.
pub(crate) fn plain_message(msg: &str) -> String {
    let msg = msg.trim_end();
    if msg.contains("did not match any variant of untagged enum Colormap") {
        return format!(
            "expected a colormap name ({}) or stops [[u, [r, g, b]], ...]",
            crate::render::Colormap::NAMES.join(", ")
        );
    }
    if let Some(rest) = msg.strip_prefix("invalid type: ")
        && let Some((found, expected)) = rest.split_once(", expected ")
    {
        return format!("expected {}, found {}", noun(expected), found_noun(found));
    }
    msg.to_string()
}

fn noun(expected: &str) -> String {
    match expected.trim() {
        "f32" | "f64" => "a number".into(),
        "u8" | "u16" | "u32" | "u64" | "usize" => "a non-negative integer".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "an integer".into(),
        "a boolean" | "bool" => "a boolean (true or false)".into(),
        "a string" | "string" => "a string".into(),
        e if e.starts_with("a sequence") || e.starts_with("an array") || e.starts_with("tuple") => {
            "an array".into()
        }
        e if e.starts_with("struct ") || e.starts_with("a map") => "a table".into(),
        e => e.to_string(),
    }
}

fn found_noun(found: &str) -> &'static str {
    let f = found.trim();
    if f.starts_with("string") {
        "a string"
    } else if f.starts_with("integer") {
        "an integer"
    } else if f.starts_with("floating point") {
        "a number"
    } else if f.starts_with("boolean") {
        "a boolean"
    } else if f.starts_with("sequence") {
        "an array"
    } else if f.starts_with("map") {
        "a table"
    } else {
        "another type"
    }
}

/// Where a path in a scene file points: `~/...` under the home directory (`$HOME`), other
/// relative paths next to the file (not the current directory), absolute paths as written.
pub(crate) fn resolve_relative(scene_file: &Path, p: &Path) -> PathBuf {
    if let Ok(rest) = p.strip_prefix("~")
        && let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty())
    {
        return PathBuf::from(home).join(rest);
    }
    if p.is_relative() {
        scene_file.parent().unwrap_or(Path::new(".")).join(p)
    } else {
        p.to_path_buf()
    }
}
