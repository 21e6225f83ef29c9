//! Fault injection: make chosen reads of any engine fail, come back short, or never answer,
//! so that the player, `bench` and the tests can show what happens when storage misbehaves.
//!
//! A [`FaultPlan`] is a list of rules, written as text and parsed by [`FaultPlan::parse`]
//! (tests; the binary parses the `SUPERCELL_FAULTS` environment variable once at start, see
//! docs/SETTINGS.md, and hands the plan to every engine through its configuration, so all
//! engines of a run share its counts and time limits):
//!
//! ```text
//! SUPERCELL_FAULTS="eio:lane=1,frame=3; short:lane=0; hang:lane=2,for=20; enter:count=1"
//! ```
//!
//! Rules are separated by `;`, each is `KIND[:KEY=VALUE,...]`. Kinds:
//!
//! - `eio`: the read fails with EIO without touching the file;
//! - `short`: the read comes back short (half its length, whole 4 KiB pages) and the engine
//!   has to continue it; the frame still arrives whole;
//! - `hang`: the read never answers (the lane stops): it is held back until the rule ends
//!   (`for=`, or [`FaultPlan::lift`]), then really issued, late, into the same memory.
//!   Stopping the engine does not end it, as it would not end a read the kernel holds: an
//!   engine must get by without it (it abandons such reads, see `engine::plan`);
//! - `enter`: io_uring's wait (`io_uring_enter`) fails on the worker that issues the read,
//!   after its reads went to the kernel (io_uring backend only);
//! - `cufile`: the cuFile read of the GDS path fails with an injected cuFile error.
//!
//! Keys select the reads (all given keys must match): `lane=L`, `frame=F`, `offset=O` (the
//! read covers byte `O` of its lane file); and limit the rule: `count=N` (fires at most `N`
//! times), `for=S` (ends `S` seconds, fractions allowed, after it first fired). Without
//! keys a rule matches every read, forever. Injected errors say "(injected)".

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// What a rule does to the reads it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// The read fails with EIO.
    Eio,
    /// The read comes back short; the engine continues it.
    Short,
    /// The read does not answer until the rule ends.
    Hang,
    /// `io_uring_enter` fails while the read is in the kernel.
    Enter,
    /// The cuFile read fails.
    CuFile,
}

impl FaultKind {
    /// The name used in the rule text.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Eio => "eio",
            FaultKind::Short => "short",
            FaultKind::Hang => "hang",
            FaultKind::Enter => "enter",
            FaultKind::CuFile => "cufile",
        }
    }

    fn parse(s: &str) -> Option<FaultKind> {
        Some(match s {
            "eio" => FaultKind::Eio,
            "short" => FaultKind::Short,
            "hang" => FaultKind::Hang,
            "enter" => FaultKind::Enter,
            "cufile" => FaultKind::CuFile,
            _ => return None,
        })
    }
}

/// One rule of a plan: which reads, how often, for how long.
#[derive(Debug)]
pub struct FaultRule {
    /// What happens.
    pub kind: FaultKind,
    /// Only reads on this lane.
    pub lane: Option<u32>,
    /// Only reads of this frame.
    pub frame: Option<u32>,
    /// Only the read covering this byte of its lane file.
    pub offset: Option<u64>,
    /// Fires at most this many times.
    pub count: Option<u64>,
    /// Ends this long after it first fired.
    pub duration: Option<Duration>,
    fired: AtomicU64,
    first_fired: Mutex<Option<Instant>>,
    lifted: AtomicBool,
}

/// Where a read goes, for matching rules.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadSite {
    pub lane: u32,
    pub frame: Option<u32>,
    pub offset: u64,
    pub len: usize,
}

impl FaultRule {
    fn matches(&self, kind: FaultKind, site: &ReadSite) -> bool {
        kind == self.kind
            && self.lane.is_none_or(|l| l == site.lane)
            && self.frame.is_none_or(|f| site.frame == Some(f))
            && self
                .offset
                .is_none_or(|o| o >= site.offset && o - site.offset < site.len as u64)
    }

    /// Whether the rule still fires (not lifted, its time not over).
    fn active(&self) -> bool {
        if self.lifted.load(Ordering::Acquire) {
            return false;
        }
        match (self.duration, *lock(&self.first_fired)) {
            (Some(d), Some(t)) => t.elapsed() < d,
            _ => true,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A set of fault rules shared by the engines it is given to; see the module documentation.
#[derive(Debug, Default)]
pub struct FaultPlan {
    rules: Vec<FaultRule>,
    /// Woken when a rule is lifted (hung reads wait on it).
    changed: Condvar,
    gate: Mutex<()>,
}

/// Plans compare by identity: two engines given the same plan share its rules and counts.
impl PartialEq for FaultPlan {
    fn eq(&self, other: &FaultPlan) -> bool {
        std::ptr::eq(self, other)
    }
}
impl Eq for FaultPlan {}

impl FaultPlan {
    /// Parses the rule text (see the module documentation).
    pub fn parse(text: &str) -> Result<FaultPlan, String> {
        let mut rules = Vec::new();
        for rule in text.split(';').map(str::trim).filter(|r| !r.is_empty()) {
            let (kind, keys) = rule.split_once(':').unwrap_or((rule, ""));
            let kind = FaultKind::parse(kind.trim()).ok_or_else(|| {
                format!(
                    "fault `{rule}`: unknown kind `{}` (eio, short, hang, enter, cufile)",
                    kind.trim()
                )
            })?;
            let mut r = FaultRule {
                kind,
                lane: None,
                frame: None,
                offset: None,
                count: None,
                duration: None,
                fired: AtomicU64::new(0),
                first_fired: Mutex::new(None),
                lifted: AtomicBool::new(false),
            };
            for kv in keys.split(',').map(str::trim).filter(|k| !k.is_empty()) {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| format!("fault `{rule}`: `{kv}` is not KEY=VALUE"))?;
                let (k, v) = (k.trim(), v.trim());
                let bad = |what: &str| format!("fault `{rule}`: {k}={v} is not {what}");
                match k {
                    "lane" => r.lane = Some(v.parse().map_err(|_| bad("a lane number"))?),
                    "frame" => r.frame = Some(v.parse().map_err(|_| bad("a frame number"))?),
                    "offset" => r.offset = Some(v.parse().map_err(|_| bad("a byte offset"))?),
                    "count" => r.count = Some(v.parse().map_err(|_| bad("a count"))?),
                    "for" => {
                        let s: f64 = v.parse().map_err(|_| bad("a number of seconds"))?;
                        r.duration =
                            Some(Duration::try_from_secs_f64(s).map_err(|_| bad("a duration"))?);
                    }
                    _ => {
                        return Err(format!(
                            "fault `{rule}`: unknown key `{k}` (lane, frame, offset, count, for)"
                        ));
                    }
                }
            }
            rules.push(r);
        }
        Ok(FaultPlan {
            rules,
            ..FaultPlan::default()
        })
    }

    /// Ends every rule (the lane comes back): held reads are issued, nothing fires again.
    pub fn lift(&self) {
        for r in &self.rules {
            r.lifted.store(true, Ordering::Release);
        }
        let _g = lock(&self.gate);
        self.changed.notify_all();
    }

    /// How many times rules of `kind` fired.
    pub fn fired(&self, kind: FaultKind) -> u64 {
        self.rules
            .iter()
            .filter(|r| r.kind == kind)
            .map(|r| r.fired.load(Ordering::Relaxed))
            .sum()
    }

    /// Whether any rule is of `kind`.
    pub fn has(&self, kind: FaultKind) -> bool {
        self.rules.iter().any(|r| r.kind == kind)
    }

    /// The rule of `kind` that fires for `site`, counting it; its index for
    /// [`FaultPlan::still_active`].
    pub(crate) fn fire(&self, kind: FaultKind, site: &ReadSite) -> Option<usize> {
        let (i, r) = self
            .rules
            .iter()
            .enumerate()
            .find(|(_, r)| r.matches(kind, site) && r.active())?;
        let n = r.fired.fetch_add(1, Ordering::AcqRel);
        if r.count.is_some_and(|c| n >= c) {
            r.fired.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        lock(&r.first_fired).get_or_insert_with(Instant::now);
        Some(i)
    }

    /// Whether rule `idx` still holds (a hung read stays held while it does).
    pub(crate) fn still_active(&self, idx: usize) -> bool {
        self.rules.get(idx).is_some_and(FaultRule::active)
    }

    /// Waits up to `max` for a rule to be lifted.
    pub(crate) fn wait(&self, max: Duration) {
        let g = lock(&self.gate);
        let _ = self.changed.wait_timeout(g, max);
    }
}

/// The message of an injected error.
pub(crate) fn injected(what: &str) -> String {
    format!("{what} (injected)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(lane: u32, frame: u32, offset: u64) -> ReadSite {
        ReadSite {
            lane,
            frame: Some(frame),
            offset,
            len: 8192,
        }
    }

    #[test]
    fn rules_parse_and_match() {
        let p = FaultPlan::parse("eio:lane=1,frame=3; short ;hang:lane=2,for=0.5;cufile:count=1")
            .unwrap();
        assert!(p.fire(FaultKind::Eio, &site(1, 3, 0)).is_some());
        assert!(p.fire(FaultKind::Eio, &site(0, 3, 0)).is_none());
        assert!(p.fire(FaultKind::Eio, &site(1, 4, 0)).is_none());
        assert!(p.fire(FaultKind::Short, &site(7, 9, 0)).is_some());
        assert!(p.fire(FaultKind::CuFile, &site(0, 0, 0)).is_some());
        assert!(
            p.fire(FaultKind::CuFile, &site(0, 0, 0)).is_none(),
            "count=1"
        );
        assert_eq!(p.fired(FaultKind::CuFile), 1);
        let h = p.fire(FaultKind::Hang, &site(2, 0, 0)).unwrap();
        assert!(p.still_active(h));
        p.lift();
        assert!(!p.still_active(h));
        assert!(p.fire(FaultKind::Eio, &site(1, 3, 0)).is_none(), "lifted");
    }

    #[test]
    fn offset_selects_the_covering_read() {
        let p = FaultPlan::parse("eio:offset=12288").unwrap();
        assert!(p.fire(FaultKind::Eio, &site(0, 0, 8192)).is_some());
        assert!(p.fire(FaultKind::Eio, &site(0, 0, 0)).is_none());
        assert!(p.fire(FaultKind::Eio, &site(0, 0, 16384)).is_none());
    }

    #[test]
    fn bad_rules_are_named() {
        for (text, needle) in [
            ("boom", "unknown kind `boom`"),
            ("eio:lane", "`lane` is not KEY=VALUE"),
            ("eio:lane=x", "lane=x is not a lane number"),
            ("hang:for=-1", "for=-1 is not a duration"),
            ("eio:disk=1", "unknown key `disk`"),
        ] {
            let e = FaultPlan::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
