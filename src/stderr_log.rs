//! The logger the binaries install ([`install`]): library code reports notes and warnings
//! through `log` rather than printing, and this writes the crate's own records to stderr
//! as their text alone (the messages carry their own `supercell:`, `play:` or `warning:`
//! prefixes, as when the library printed them). Records of other crates (wgpu's, naga's)
//! are left out, as they were before.

use log::{Level, LevelFilter, Log, Metadata, Record};

/// Writes this crate's records of level info and above to stderr.
struct StderrLog;

impl Log for StderrLog {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= Level::Info && m.target().starts_with("supercell")
    }

    fn log(&self, r: &Record) {
        if self.enabled(r.metadata()) {
            eprintln!("{}", r.args());
        }
    }

    fn flush(&self) {}
}

/// Installs the stderr logger for the process (a binary calls it first thing; a second
/// call, or a logger already installed, leaves the first in place).
pub fn install() {
    static LOGGER: StderrLog = StderrLog;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(LevelFilter::Info);
    }
}
