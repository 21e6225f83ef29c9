//! Names of the files a dataset writer creates, and the test of whether a name is one.
//!
//! Every lane file is called `<write id>-L<lane>-S<segment>.sclane` (lane at least three
//! digits, segment at least five), and is written under that name plus `.tmp` until the
//! write finishes. A write id is short and made of ASCII letters, digits, `-` and `_`, so a
//! lane file name never holds a `/` or `..` and cannot name anything outside its lane
//! directory. Readers open, and writers delete, only files whose names follow this pattern.

/// Extension of lane data files.
pub(crate) const LANE_EXT: &str = "sclane";
/// Extension a file carries while it is being written.
pub(crate) const TMP_EXT: &str = "tmp";
/// Longest accepted write id (the writer's are about 30 characters).
const MAX_WRITE_ID_LEN: usize = 96;

/// Whether `id` can be a write id: 1 to 96 ASCII letters, digits, `-` or `_`.
pub(crate) fn is_write_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_WRITE_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The name of segment `segment` of lane `lane` written by write `write_id`.
pub(crate) fn lane_file_name(write_id: &str, lane: u32, segment: usize) -> String {
    format!("{write_id}-L{lane:03}-S{segment:05}.{LANE_EXT}")
}

/// A lane file name taken apart.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LaneFileName<'a> {
    /// The write that created the file.
    pub write_id: &'a str,
    /// Whether it still has its temporary name (`.sclane.tmp`).
    pub temporary: bool,
}

/// Takes `name` apart if it is a lane file name (final or temporary) of any write; `None`
/// for every other name.
pub(crate) fn parse_lane_file_name(name: &str) -> Option<LaneFileName<'_>> {
    let (stem, temporary) = match name.strip_suffix(&format!(".{LANE_EXT}.{TMP_EXT}")) {
        Some(stem) => (stem, true),
        None => (name.strip_suffix(&format!(".{LANE_EXT}"))?, false),
    };
    let (rest, segment) = stem.rsplit_once("-S")?;
    let (write_id, lane) = rest.rsplit_once("-L")?;
    let digits = |s: &str, min: usize| s.len() >= min && s.bytes().all(|b| b.is_ascii_digit());
    (is_write_id(write_id) && digits(lane, 3) && digits(segment, 5)).then_some(LaneFileName {
        write_id,
        temporary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_strangers_are_refused() {
        let id = "w6b0cfa70182d74c5-3ad5-0";
        let name = lane_file_name(id, 2, 7);
        assert_eq!(name, "w6b0cfa70182d74c5-3ad5-0-L002-S00007.sclane");
        let parsed = parse_lane_file_name(&name).unwrap();
        assert_eq!((parsed.write_id, parsed.temporary), (id, false));
        let tmp_name = format!("{name}.tmp");
        let tmp = parse_lane_file_name(&tmp_name).unwrap();
        assert_eq!((tmp.write_id, tmp.temporary), (id, true));
        assert!(parse_lane_file_name(&lane_file_name(id, 1234, 123_456)).is_some());
        for stranger in [
            "precious.txt",
            "manifest.json",
            ".sclane",
            "-L000-S00000.sclane",
            "w1-L00-S00000.sclane",
            "w1-L000-S0000.sclane",
            "w1-L000-S00000.sclane.bak",
            "../w1-L000-S00000.sclane",
            "a/w1-L000-S00000.sclane",
            "w.1-L000-S00000.sclane",
            "w1-Lx00-S00000.sclane",
        ] {
            assert!(parse_lane_file_name(stranger).is_none(), "{stranger}");
        }
        assert!(!is_write_id(""));
        assert!(!is_write_id(".."));
        assert!(!is_write_id(&"w".repeat(97)));
    }
}
