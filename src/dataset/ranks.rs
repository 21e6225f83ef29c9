//! A dataset written by several ranks together (`mpirun -n N supercell-data generate` or
//! `import`), byte for byte the dataset one process writes.
//!
//! Frames are dealt in turn (rank k converts frames k, k + N, ...) and placed in *rounds*:
//! in round r every rank converts its frame r·N + k, then the ranks exchange each frame's
//! time and grid sizes, and every rank places the round's N frames in frame order, writing
//! its own and leaving the others' bytes to their ranks. Where a chunk goes depends only on
//! the frames before it, so every rank computes the single writer's layout, and the lane
//! files end up as one process writes them. (Blocks of consecutive frames per rank would
//! make each rank wait for the sizes of every frame before its block: the ranks would take
//! turns instead of working together.) A rank holds one converted frame at a time.
//!
//! Crash safety is the single writer's: rank 0 takes the lock, records the intent and is
//! the only one to commit; the lane files keep their temporary names until every rank has
//! made its bytes durable and said so; then rank 0 renames them and writes the manifest,
//! last. Every exchange carries each rank's status, so a rank that fails is named on every
//! rank at the next exchange and the write is abandoned everywhere (rank 0 removes what was
//! written).
//!
//! No rank waits without end for another: every exchange is bounded by the write's wait
//! ([`WriteRanks::wait`]; built on point-to-point messages, `crate::cluster::all_gather_within`).
//! A rank that died or stopped answering is named by those that waited for it
//! ([`DatasetError::RanksSilent`]): rank 0 abandons the write there and then, removing the
//! lane files every rank wrote and its intent, so the directory holds what it held before
//! (the old dataset, or none); the caller must then end the run ([`Ranks::abort`]), since
//! the silent rank cannot finish its part. Where rank 0 is the silent one, its files stay
//! with its intent, which the next writer's recovery removes. Bytes rank 0 must collect
//! (the frame records, which grow with the frames) go one way only, to rank 0, each rank
//! sending once rank 0 invited it (`crate::cluster::gather_large_within`), so that no large
//! send waits on a rank that stopped. The other messages are small (a few hundred bytes a
//! rank): MPI sends them without the receiver's help below the transport's eager limit
//! (4 KiB between ranks of one host with Open MPI's shared-memory transport, 64 KiB over
//! TCP), so rounds of many ranks with many attributes can exceed it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::{DatasetError, Result};
use super::manifest::{Attribute, Brick, Frame, Manifest, Provenance};
use super::writer::{AttributeSpec, DatasetWriter, LaneSpec, SharedWrite};
use crate::cluster::{Ranks, Silent, all_gather_within, broadcast_within, gather_large_within};

/// The ranks of a shared write, and how long a rank waits at an exchange for the others
/// before it names the silent ones and gives up (`None`: as long as it takes). The wait
/// must cover the spread between ranks in converting one frame: a rank is only silent once
/// another has waited this long for it at one exchange (rank 0 waits this long for the
/// others, they twice as long for rank 0).
#[derive(Clone, Copy)]
pub struct WriteRanks<'r> {
    /// The ranks.
    pub ranks: &'r dyn Ranks,
    /// The longest wait at one exchange.
    pub wait: Option<Duration>,
}

/// How the ranks' converters hand frames over, as a single writer would take them: whole
/// ([`DatasetWriter::push_frame`]) or grid by grid ([`DatasetWriter::begin_frame`]). The
/// two differ only in when a lane starts a new file, which must match the one-process run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameHandover {
    /// Whole frames (the importers).
    Whole,
    /// One grid at a time (the generator).
    GridByGrid,
}

/// One rank's part in a dataset written by several ranks; see the module docs.
pub struct RankWriter<'r> {
    ranks: &'r dyn Ranks,
    wait: Option<Duration>,
    writer: Option<DatasetWriter>,
    handover: FrameHandover,
    frames: usize,
    /// Frames placed so far (every rank's).
    placed: usize,
    /// Why this rank cannot go on (it could not join): the others hear it at the next
    /// exchange.
    stopped: Option<String>,
    /// Why the write ended, once an exchange reported failed or silent ranks: no more
    /// exchanges then.
    ended: Option<Ended>,
}

/// Why a shared write ended before its commit.
#[derive(Clone)]
enum Ended {
    /// These ranks failed (rank, host, why); every rank heard it.
    Failed(Vec<(usize, String, String)>),
    /// These ranks did not answer in time.
    Silent(Silent),
}

impl Ended {
    fn error(&self) -> DatasetError {
        match self {
            Ended::Failed(failed) => DatasetError::RankFailed {
                failed: failed.clone(),
            },
            Ended::Silent(s) => DatasetError::RanksSilent(s.clone()),
        }
    }
}

/// What a rank tells the others at an exchange.
#[derive(Serialize, Deserialize)]
enum Message {
    /// This rank (on this host) failed, for this reason.
    Failed(String, String),
    /// Rank 0's write, for the others to join.
    Share(SharedWrite),
    /// This rank's frame of the round (time as bits, grid sizes), or none.
    Frame(Option<(u64, Vec<u64>)>),
    /// This rank's bytes are durable: its frames' records, attribute statistics and its
    /// caller's report (for rank 0 to print).
    Done(Vec<(usize, Frame)>, Vec<WireAttribute>, String),
    /// Nothing to say beyond success.
    Ok,
}

/// An attribute's statistics with every float as its bits (text may round the last bit).
#[derive(Serialize, Deserialize)]
struct WireAttribute {
    attribute: Attribute,
    value_range: Option<[u64; 2]>,
    world_bbox: Option<[[u64; 3]; 2]>,
    voxel_size: Option<[u64; 3]>,
}

impl WireAttribute {
    fn of(a: &Attribute) -> WireAttribute {
        WireAttribute {
            attribute: a.clone(),
            value_range: a.value_range.map(|r| r.map(f64::to_bits)),
            world_bbox: a.world_bbox.map(|b| b.map(|c| c.map(f64::to_bits))),
            voxel_size: a.voxel_size.map(|v| v.map(f64::to_bits)),
        }
    }

    fn into_attribute(self) -> Attribute {
        Attribute {
            value_range: self.value_range.map(|r| r.map(f64::from_bits)),
            world_bbox: self.world_bbox.map(|b| b.map(|c| c.map(f64::from_bits))),
            voxel_size: self.voxel_size.map(|v| v.map(f64::from_bits)),
            ..self.attribute
        }
    }
}

/// Returns once every rank of `team` has said whether it is ready (`mine`: this rank's
/// state, an error saying why not); an error naming each rank that is not, on every rank
/// (or each that did not answer within the wait). For the steps before a shared write
/// starts (opening the inputs), which one rank may fail alone: the others learn of it here
/// instead of waiting for it.
pub fn all_ready(team: WriteRanks<'_>, mine: std::result::Result<(), String>) -> Result<()> {
    let message = match mine {
        Ok(()) => Message::Ok,
        Err(why) => Message::Failed(team.ranks.host(), why),
    };
    let bytes = serde_json::to_vec(&message).expect("messages serialize");
    let all =
        all_gather_within(team.ranks, &bytes, team.wait).map_err(DatasetError::RanksSilent)?;
    let failed = failures(&all);
    match failed.is_empty() {
        true => Ok(()),
        false => Err(DatasetError::RankFailed { failed }),
    }
}

/// Each rank whose message says it failed (or that sent no message one can read): rank,
/// host, why.
fn failures(all: &[Vec<u8>]) -> Vec<(usize, String, String)> {
    all.iter()
        .enumerate()
        .filter_map(|(rank, b)| match serde_json::from_slice(b) {
            Ok(Message::Failed(host, why)) => Some((rank, host, why)),
            Ok(_) => None,
            Err(e) => Some((rank, String::new(), format!("garbled message: {e}"))),
        })
        .collect()
}

/// Whether `rank` of `ranks` converts frame `frame`.
pub fn owns(frame: usize, rank: usize, ranks: usize) -> bool {
    frame % ranks.max(1) == rank
}

impl<'r> RankWriter<'r> {
    /// Starts a write of `frames` frames by every rank of `team` (each calls this, with
    /// the same arguments): rank 0 creates it as [`DatasetWriter::create`] does (with
    /// [`DatasetWriter::set_bricks`] where `bricks` is not empty), the others join it. An
    /// error on any rank is an error on every rank, naming it.
    #[allow(clippy::too_many_arguments)]
    pub fn create(
        team: WriteRanks<'r>,
        dir: &std::path::Path,
        lanes: LaneSpec,
        chunk_size: u64,
        attributes: Vec<AttributeSpec>,
        bricks: Vec<Brick>,
        provenance: Provenance,
        frames: usize,
        handover: FrameHandover,
    ) -> Result<RankWriter<'r>> {
        let ranks = team.ranks;
        let mut me = RankWriter {
            ranks,
            wait: team.wait,
            writer: None,
            handover,
            frames,
            placed: 0,
            stopped: None,
            ended: None,
        };
        let mine = if ranks.rank() == 0 {
            DatasetWriter::create(dir, lanes, chunk_size, attributes.clone(), provenance).and_then(
                |mut w| {
                    if !bricks.is_empty() {
                        w.set_bricks(bricks)?;
                    }
                    let share = w.share()?;
                    me.writer = Some(w);
                    Ok(Message::Share(share))
                },
            )
        } else {
            Ok(Message::Ok)
        };
        let all = me.exchange(mine)?;
        if ranks.rank() != 0 {
            let Message::Share(share) = &all[0] else {
                return Err(me.stop_on_protocol());
            };
            let joined = DatasetWriter::join(share, attributes);
            // A rank that cannot join says so at the first round.
            match joined {
                Ok(w) => me.writer = Some(w),
                Err(e) => me.stopped = Some(e.to_string()),
            }
        }
        Ok(me)
    }

    /// This rank's index among the ranks.
    pub fn rank(&self) -> usize {
        self.ranks.rank()
    }

    /// Whether this rank converts frame `frame`.
    pub fn owns(&self, frame: usize) -> bool {
        owns(frame, self.ranks.rank(), self.ranks.size())
    }

    /// Hands over this rank's next frame, `frame` (the next one it owns), at `time`, and
    /// places the round it belongs to: every rank's frame of the round written or left to
    /// its rank. Errors (this rank's or another's) end the write on every rank.
    pub fn push_frame(&mut self, frame: usize, time: f64, grids: &[Vec<u8>]) -> Result<()> {
        let round_start = self.placed;
        let expected = round_start + self.ranks.rank();
        if frame != expected || frame >= self.frames {
            return self.fail(format!(
                "frame {frame} handed over where this rank's next frame is {expected}"
            ));
        }
        let sizes = grids.iter().map(|g| g.len() as u64).collect();
        let all = self.exchange(Ok(Message::Frame(Some((time.to_bits(), sizes)))))?;
        self.place_round(&all, Some(grids))
    }

    /// Ends this rank's part: `converted` says whether its conversion succeeded. Takes part
    /// in the rounds left (frames of other ranks), makes this rank's bytes durable, and on
    /// rank 0 commits the dataset once every rank has; returns the manifest on rank 0,
    /// `None` on the others. A failure anywhere is an error on every rank, naming the rank.
    pub fn finish(self, converted: std::result::Result<(), String>) -> Result<Option<Manifest>> {
        Ok(self
            .finish_reporting(converted, String::new())?
            .map(|(manifest, _)| manifest))
    }

    /// [`finish`](Self::finish), with this rank's `report` (what its conversion found, for
    /// rank 0 to print): on rank 0 the manifest and every rank's report in rank order.
    pub fn finish_reporting(
        mut self,
        converted: std::result::Result<(), String>,
        report: String,
    ) -> Result<Option<(Manifest, Vec<String>)>> {
        if let Err(why) = converted {
            return self.fail(why);
        }
        while self.placed < self.frames {
            let all = self.exchange(Ok(Message::Frame(None)))?;
            self.place_round(&all, None)?;
        }
        let Some(writer) = self.writer.as_mut() else {
            return self.fail("this rank has no writer".into());
        };
        let done = writer.sync_own().map(|()| {
            let attributes = writer.attributes().iter().map(WireAttribute::of).collect();
            Message::Done(writer.own_frames(), attributes, report)
        });
        let committed = match self.gather_on_rank_zero(done) {
            Ok(Some(all)) => self.commit(all).map(Some),
            Ok(None) => Ok(None),
            // Rank 0 tells the others of a failed rank below; silence ends the run.
            Err(e) if self.ranks.rank() == 0 && !matches!(e, DatasetError::RanksSilent(_)) => {
                Err(e)
            }
            Err(e) => return Err(e),
        };
        // Every rank learns whether rank 0 committed (rank 0 does not wait for the others
        // to hear it: the dataset is committed whatever happens to them now).
        let outcome = match &committed {
            Ok(_) => Message::Ok,
            Err(e) => Message::Failed(self.ranks.host(), e.to_string()),
        };
        let bytes = serde_json::to_vec(&outcome).expect("messages serialize");
        let decided = broadcast_within(self.ranks, &bytes, self.wait);
        if self.ranks.rank() != 0 {
            let failed = failures(&[decided.map_err(|s| self.silent(s))?]);
            if let Some((_, host, why)) = failed.into_iter().next() {
                self.writer = None;
                return Err(DatasetError::RankFailed {
                    failed: vec![(0, host, why)],
                });
            }
        }
        committed
    }

    /// Every rank's message on rank 0 (`None` on the others), each rank waiting at most the
    /// write's wait; an error naming each rank that failed (on rank 0) or was silent.
    fn gather_on_rank_zero(&mut self, mine: Result<Message>) -> Result<Option<Vec<Message>>> {
        if let Some(ended) = &self.ended {
            return Err(ended.error());
        }
        let mine = mine.unwrap_or_else(|e| Message::Failed(self.ranks.host(), e.to_string()));
        let bytes = serde_json::to_vec(&mine).expect("messages serialize");
        let gathered = gather_large_within(self.ranks, &bytes, self.wait);
        let Some(all) = gathered.map_err(|s| self.silent(s))? else {
            return Ok(None);
        };
        let failed = failures(&all);
        if !failed.is_empty() {
            // Rank 0 tells the others in the outcome; its writer removes what was written.
            self.writer = None;
            self.ended = Some(Ended::Failed(failed.clone()));
            return Err(DatasetError::RankFailed { failed });
        }
        Ok(Some(
            all.iter()
                .map(|b| serde_json::from_slice(b).expect("read by `failures`"))
                .collect(),
        ))
    }

    /// The write abandoned for ranks that did not answer: rank 0's writer removes what
    /// every rank wrote as it drops (the others leave their files to it).
    fn silent(&mut self, silent: Silent) -> DatasetError {
        self.writer = None;
        self.ended = Some(Ended::Silent(silent.clone()));
        DatasetError::RanksSilent(silent)
    }

    /// Rank 0: the other ranks' frames and statistics taken in, the dataset committed;
    /// with every rank's report.
    fn commit(&mut self, all: Vec<Message>) -> Result<(Manifest, Vec<String>)> {
        let mut writer = self.writer.take().expect("rank 0 has its writer");
        let mut reports = Vec::with_capacity(all.len());
        for (rank, message) in all.into_iter().enumerate() {
            let Message::Done(frames, attributes, report) = message else {
                return Err(DatasetError::Usage("a rank sent no frame records".into()));
            };
            reports.push(report);
            if rank == 0 {
                continue;
            }
            for (index, frame) in frames {
                writer.adopt_frame(index, frame)?;
            }
            let attributes: Vec<Attribute> = attributes
                .into_iter()
                .map(WireAttribute::into_attribute)
                .collect();
            writer.merge_attributes(&attributes)?;
        }
        Ok((writer.finish()?, reports))
    }

    /// Places the round's frames, every rank's in turn: this rank's `own` grids written.
    fn place_round(&mut self, all: &[Message], own: Option<&[Vec<u8>]>) -> Result<()> {
        let me = self.ranks.rank();
        let round_start = self.placed;
        let frames = self.frames;
        let handover = self.handover;
        let Some(writer) = self.writer.as_mut() else {
            return self.fail("this rank has no writer".into());
        };
        let mut placed = Ok(());
        for (rank, message) in all.iter().enumerate() {
            let Message::Frame(frame) = message else {
                placed = Err(DatasetError::Usage(format!("rank {rank}: not a frame")));
                break;
            };
            let index = round_start + rank;
            if frame.is_some() != (index < frames) {
                placed = Err(DatasetError::Usage(format!(
                    "rank {rank}: frame {index} of {frames} handed over out of turn"
                )));
                break;
            }
            let Some((time, sizes)) = frame else {
                continue;
            };
            let time = f64::from_bits(*time);
            placed = match (rank == me, own, handover) {
                (true, Some(grids), FrameHandover::Whole) => {
                    writer.push_frame_borrowed(time, grids)
                }
                (true, Some(grids), FrameHandover::GridByGrid) => {
                    push_grid_by_grid(writer, time, grids)
                }
                (true, None, _) => Err(DatasetError::Usage("this rank's frame is missing".into())),
                (false, ..) => writer.skip_frame(time, sizes, handover == FrameHandover::Whole),
            };
            if placed.is_err() {
                break;
            }
            self.placed += 1;
        }
        match placed {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e.to_string()),
        }
    }

    /// Ends the write on every rank for this rank's reason `why`.
    fn fail<T>(&mut self, why: String) -> Result<T> {
        let said = self.exchange(Err(DatasetError::Usage(why.clone())));
        // An exchange that carries a failure always fails; the error names every rank.
        Err(said.err().unwrap_or(DatasetError::Usage(why)))
    }

    /// Every rank's message, once every rank has sent one; an error naming each failed
    /// rank where any failed (or this rank's write had already stopped).
    fn exchange(&mut self, mine: Result<Message>) -> Result<Vec<Message>> {
        if let Some(ended) = &self.ended {
            return Err(ended.error());
        }
        if let Some(why) = &self.stopped {
            // Stopped before (a rank that could not join): the others hear it now.
            let why = why.clone();
            return self.exchange_inner(Err(DatasetError::Usage(why)));
        }
        self.exchange_inner(mine)
    }

    fn exchange_inner(&mut self, mine: Result<Message>) -> Result<Vec<Message>> {
        let mine = mine.unwrap_or_else(|e| Message::Failed(self.ranks.host(), e.to_string()));
        let bytes = serde_json::to_vec(&mine).expect("messages serialize");
        let all = all_gather_within(self.ranks, &bytes, self.wait).map_err(|s| self.silent(s))?;
        let failed = failures(&all);
        if failed.is_empty() {
            return Ok(all
                .iter()
                .map(|b| serde_json::from_slice(b).expect("read by `failures`"))
                .collect());
        }
        // Abandoned: rank 0's writer removes what every rank wrote when it drops.
        self.writer = None;
        self.ended = Some(Ended::Failed(failed.clone()));
        Err(DatasetError::RankFailed { failed })
    }

    fn stop_on_protocol(&mut self) -> DatasetError {
        DatasetError::Usage("rank 0 did not share its write".into())
    }
}

/// Writes one frame grid by grid, as the generator hands a single writer its frames.
fn push_grid_by_grid(writer: &mut DatasetWriter, time: f64, grids: &[Vec<u8>]) -> Result<()> {
    writer.begin_frame(time)?;
    for g in grids {
        writer.push_grid(g)?;
    }
    writer.end_frame()
}

/// Every file of the dataset at `dir` (path relative to it → bytes), with the write's id
/// (in lane file names and the manifest) replaced by `ID` and the manifest's finish time by
/// 0: what two writes of the same frames hold alike, whatever their ranks. For checking
/// that a write across ranks equals a single process's.
pub fn comparable_contents(
    dir: &std::path::Path,
) -> Result<std::collections::BTreeMap<String, Vec<u8>>> {
    let manifest = super::Dataset::open(dir)?.manifest().clone();
    let id = manifest.write_id.clone();
    let time = format!("\"unix_time\": {}", manifest.created.unix_time);
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    let read =
        |p: &std::path::Path| std::fs::read(p).map_err(|e| DatasetError::io("cannot read", p, e));
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| DatasetError::io("cannot list", &d, e))?;
        for e in entries {
            let p = e
                .map_err(|e| DatasetError::io("cannot list", &d, e))?
                .path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(dir).unwrap_or(&p);
            let name = rel.to_string_lossy().replace(&id, "ID");
            let mut bytes = read(&p)?;
            if name == super::MANIFEST_FILE {
                bytes = String::from_utf8_lossy(&bytes)
                    .replace(&id, "ID")
                    .replacen(&time, "\"unix_time\": 0", 1)
                    .into_bytes();
            }
            out.insert(name, bytes);
        }
    }
    Ok(out)
}

/// The first difference between the datasets at `a` and `b` as [`comparable_contents`]
/// sees them (a file only one has, or one whose bytes differ), or `None`: the same frames
/// written the same way.
pub fn first_difference(a: &std::path::Path, b: &std::path::Path) -> Result<Option<String>> {
    let (ca, cb) = (comparable_contents(a)?, comparable_contents(b)?);
    if let Some(name) = ca.keys().find(|k| !cb.contains_key(*k)) {
        return Ok(Some(format!("{name} is only in {}", a.display())));
    }
    if let Some(name) = cb.keys().find(|k| !ca.contains_key(*k)) {
        return Ok(Some(format!("{name} is only in {}", b.display())));
    }
    Ok(ca
        .iter()
        .find(|(name, bytes)| cb[*name] != **bytes)
        .map(|(name, _)| format!("{name} differs")))
}
