//! `play` across MPI ranks: the coordinator's GPUs are ranks ([`RankWorkers`], one more
//! transport behind [`Workers`]). Rank `k` runs the player of GPU `k` over the frames it
//! owns (alternate frames) and answers rank 0's control messages ([`serve`]); rank 0 runs
//! GPU 0's player in its own process and the one coordinator
//! ([`crate::app::gpus::MultiPlayer`], its [`crate::pipeline::multi::MultiScheduler`]), which
//! presents strictly in order, jumps exactly, switches every rank's path and gives every
//! rank the view, as it does for the GPUs of one process. One process (N = 1, [`Solo`])
//! runs through the same code.
//!
//! The messages: rank 0 sends each rank small control messages (a jump, play or pause, the
//! path, the view, "go on" once the display took an image, "report", "stop", and a
//! heartbeat); a rank sends rank 0 a hello (its slots, paths, frame times), then reports:
//! its damaged frames and figures at least every [`REPORT_EVERY`], and with each frame it
//! has rendered the frame's finished image; each report carries the faults its player met
//! since the last (rank 0's report lists them with the rank and host) and the last error it
//! played on past. In a long run (`--soak`,
//! [`crate::app::soak::run`]) rank 0 asks each rank to sample its own process
//! (`Control::Sample`) and the sample comes back with the rank's next report. A rank renders up to [`AHEAD`] frames ahead of
//! rank 0 letting them go (rank 0 keeps their images in order and hands the coordinator
//! one at a time, as a GPU of one process holds its one finished frame), so a rank's
//! renders overlap the presentation of the others' frames rather than waiting for each.
//! Every jump (and view change, which re-points every GPU) counts up a generation; a report
//! of an older generation (a frame rendered before the jump reached the rank) is dropped.
//!
//! Nobody waits for ever: a rank that sends nothing for `timeout` is named
//! ([`crate::cluster::Silent`]) by rank 0, and a rank that hears nothing from rank 0 for
//! twice that names rank 0. Control messages and reports without an image are blocking
//! point-to-point sends of a few hundred bytes (sent eagerly by MPI). A report with an
//! image is posted with an immediate send ([`Ranks::post`], `MPI_Isend`) and then driven
//! until rank 0 has it, at most `timeout` (`Served::drive_sends`): Open MPI's shared-memory
//! transport moves a large message only while the sender is inside MPI calls, so an image
//! left in flight while the rank rendered on took 120 ms to arrive on an H100 (8 MB at
//! 1920x1080; play 0.41–0.47 × one process) against 15–19 ms sent at once. One not taken
//! within `timeout` names rank 0 (and the run ends then, the send left to MPI), and a rank
//! told to stop waits (at most `timeout`) for its sends under way.
//!
//! The view a rank is given is rank 0's whole view, as [`crate::app::gpus::MultiPlayer::sync_view`]
//! gives the GPUs of one process: the camera, the render settings and the size
//! (`Control::View`), and each attribute channel's look (its switch and transfer function:
//! colour map, opacity, medium, extinction, emission, shadows, albedo), a message per
//! channel that changed since the last it was sent (`Control::Look`).

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::config::{PathSel, PlayError};
use super::core::Player;
use super::faults::FrameFault;
use super::gpus::{GpuName, Image, LocalGpu, Workers};
use super::headless::FaultReport;
use super::soak::SoakSample;
use super::stats::PathFigures;
use crate::cluster::{Posted, Ranks, Silent};
use crate::pipeline::{Direction, PlayMode};
use crate::render::{AttributeView, Camera, RenderSettings, TransferFunction, View};

/// Tag of rank 0's control messages.
const CONTROL: i32 = 0x5c20;
/// Tag of the ranks' reports.
const REPORT: i32 = 0x5c21;
/// Tag of the ranks' hello.
const HELLO: i32 = 0x5c22;

/// Finished frames a rank may render ahead of rank 0 letting them go, their images
/// waiting on rank 0 (8 MB each at 1920x1080): its renders then overlap the presentation
/// of the other ranks' frames instead of waiting for each to be shown.
pub const AHEAD: usize = 3;

/// How often a rank reports (and rank 0 sends a heartbeat) when nothing else happens.
pub const REPORT_EVERY: Duration = Duration::from_millis(200);

/// Rank 0's control messages.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum Control {
    /// Jump to local frame `local`: a new generation.
    Point { generation: u64, local: u32 },
    /// Play or pause.
    Playing(bool),
    /// Switch the frame path.
    Path(PathSel),
    /// The view to render.
    View {
        camera: Camera,
        settings: RenderSettings,
        size: (u32, u32),
    },
    /// The look of attribute channel `index` of the view (`None`: the channel styles
    /// nothing): what the view a rank is given leaves out, sent where it changed.
    Look { index: u32, look: Option<Look> },
    /// The display took the image: render on.
    GoOn { generation: u64 },
    /// Start the figures of a path again.
    ResetStats(PathSel),
    /// Report now, answering `nonce`.
    Report { nonce: u64 },
    /// Play in this direction.
    Direction(Direction),
    /// Turn, stop or wrap at the ends of the rank's frames so.
    Mode(PlayMode),
    /// Show or hide view slot `slot`'s attribute.
    ShowAttribute { slot: usize, on: bool },
    /// Show or hide dataset attribute `attribute` (manifest order).
    ShowDatasetAttribute { attribute: usize, on: bool },
    /// Sample this process at `t_s` of a long run (`--soak`) and send it.
    Sample { t_s: f64 },
    /// Nothing new: rank 0 is alive.
    Alive,
    /// The run is over.
    Stop,
}

/// One attribute channel's look as rank 0's view has it: its switch and its transfer
/// function (range, colour map, opacity curve, medium, extinction, emission, shadows,
/// albedo).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Look {
    enabled: bool,
    tf: TransferFunction,
}

impl Look {
    fn of(view: &Option<AttributeView>) -> Option<Look> {
        view.as_ref().map(|a| Look {
            enabled: a.enabled,
            tf: a.tf.clone(),
        })
    }
}

/// A rank's first message.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Hello {
    adapter: String,
    host: String,
    local_rank: usize,
    /// How its GPU was chosen.
    matched: String,
    slots: usize,
    frame_times: Vec<f64>,
    direct: Result<(), String>,
    host_path: Result<(), String>,
}

/// A frame a rank has rendered; its image follows the report's header.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Finished {
    local: u32,
    bytes: u64,
    width: u32,
    height: u32,
    readback_ms: f64,
}

/// A rank's report.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Status {
    generation: u64,
    nonce: u64,
    finished: Option<Finished>,
    damaged: Vec<u32>,
    direct: (PathFigures, String),
    host: (PathFigures, String),
    error: Option<String>,
    /// The last report: the rank obeyed "stop".
    stopped: bool,
    /// The samples of this process rank 0 asked for since the last report (`--soak`):
    /// several where asks came faster than reports.
    samples: Vec<SoakSample>,
    /// The last error its player saw and played on past.
    last_error: Option<String>,
    /// Faults its player met since its last report (the latest [`FAULTS_SENT`] of them).
    faults: Vec<FrameFault>,
    /// Faults its player met in all, and damaged frames that played later.
    fault_count: u64,
    recovered: u64,
}

/// Distinct errors of a rank rank 0 keeps (the first ones).
const ERRORS_KEPT: usize = 100;

/// Faults a rank sends in one report at most (the count goes on past it), as many as a
/// player keeps.
const FAULTS_SENT: usize = 1000;

/// `header` as JSON behind its length, then `tail`.
fn pack<T: Serialize>(header: &T, tail: &[u8]) -> Vec<u8> {
    let json = serde_json::to_vec(header).expect("messages are JSON");
    let mut out = Vec::with_capacity(4 + json.len() + tail.len());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(tail);
    out
}

/// [`pack`]'s header and tail back.
fn unpack<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<(T, &[u8]), String> {
    let len = bytes
        .get(..4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
        .ok_or("a message shorter than its header's length")?;
    let json = bytes
        .get(4..4 + len)
        .ok_or("a message shorter than its header")?;
    let header = serde_json::from_slice(json).map_err(|e| format!("a message's header: {e}"))?;
    Ok((header, &bytes[4 + len..]))
}

/// What rank 0 knows of another rank's GPU.
struct Remote {
    rank: usize,
    name: GpuName,
    hello: Hello,
    generation: u64,
    holding: bool,
    /// The frames of this generation the rank finished and rank 0 has not let go, oldest
    /// first: each with its pixels and the ms its receipt took. The rank runs ahead by at
    /// most [`AHEAD`] of them, so its renders overlap rank 0's presentation.
    finished: VecDeque<(Finished, Vec<u8>, f64)>,
    status: Status,
    /// Samples of its process (`--soak`), not yet taken.
    samples: Vec<SoakSample>,
    /// Errors its player saw and played on past, distinct, oldest first.
    errors: Vec<String>,
    /// The latest faults its player met (at most [`FAULTS_SENT`]), oldest first.
    faults: VecDeque<FrameFault>,
    /// The attributes' looks last sent (`None`: none sent yet).
    looks: Option<Vec<Option<Look>>>,
    last_heard: Instant,
    last_sent: Instant,
}

/// The GPUs of a run across ranks, as rank 0's coordinator sees them: GPU 0 is this
/// process's player, GPU `k` rank `k`'s; see the module documentation.
pub struct RankWorkers {
    ranks: Rc<dyn Ranks>,
    local: LocalGpu,
    remotes: Vec<Remote>,
    timeout: Duration,
    nonce: u64,
    silent: Option<Silent>,
}

impl RankWorkers {
    /// Rank 0's GPUs: `local` (this process's player, GPU 0) and every other rank's, whose
    /// hellos it waits for (at most `timeout`, else the silent ranks are named).
    pub fn connect(
        ranks: Rc<dyn Ranks>,
        local: LocalGpu,
        timeout: Duration,
    ) -> Result<RankWorkers, RanksPlayError> {
        let size = ranks.size();
        let deadline = Instant::now() + timeout;
        let mut hellos: Vec<Option<Hello>> = (0..size).map(|_| None).collect();
        while hellos[1..].iter().any(Option::is_none) {
            let Some((from, bytes)) = ranks.receive_until(HELLO, Some(deadline)) else {
                return Err(RanksPlayError::Silent(Silent {
                    ranks: (1..size).filter(|&r| hellos[r].is_none()).collect(),
                    waited: timeout,
                }));
            };
            let (hello, _) = unpack::<Hello>(&bytes)
                .map_err(|e| PlayError::Usage(format!("rank {from}'s hello: {e}")))?;
            if let Some(h) = hellos.get_mut(from).filter(|_| from != 0) {
                *h = Some(hello);
            }
        }
        let now = Instant::now();
        let remotes = hellos
            .into_iter()
            .enumerate()
            .skip(1)
            .map(|(rank, h)| {
                let hello = h.expect("every hello arrived");
                Remote {
                    rank,
                    name: GpuName {
                        ordinal: hello.local_rank,
                        matched: hello.matched.clone(),
                        device: hello.adapter.clone(),
                        host: Some(hello.host.clone()),
                    },
                    hello,
                    generation: 0,
                    holding: false,
                    finished: VecDeque::new(),
                    status: Status::default(),
                    samples: Vec::new(),
                    errors: Vec::new(),
                    faults: VecDeque::new(),
                    looks: None,
                    last_heard: now,
                    last_sent: now,
                }
            })
            .collect();
        Ok(RankWorkers {
            ranks,
            local,
            remotes,
            timeout,
            nonce: 0,
            silent: None,
        })
    }

    fn remote(&mut self, k: usize) -> &mut Remote {
        &mut self.remotes[k - 1]
    }

    /// Sends `control` to GPU `k`'s rank, waiting for it to be taken at most until that
    /// rank would be named silent anyway: once a stopped rank's MPI buffers are full, a
    /// blocking send would hold rank 0 for ever (it did with a rank SIGSTOPped and a 20 s
    /// timeout). A message not taken by then names the rank silent (the run then ends).
    fn send(&mut self, k: usize, control: &Control) {
        let bytes = pack(control, &[]);
        let ranks = self.ranks.clone();
        let timeout = self.timeout;
        let r = self.remote(k);
        let (rank, deadline) = (r.rank, (r.last_heard + timeout).max(Instant::now()));
        r.last_sent = Instant::now();
        if !ranks.send_until(rank, CONTROL, &bytes, Some(deadline)) && self.silent.is_none() {
            self.silent = Some(Silent {
                ranks: vec![rank],
                waited: timeout,
            });
        }
    }

    /// Takes every report that arrived, sends heartbeats, and names ranks silent for
    /// longer than the timeout.
    fn pump(&mut self) -> Result<(), PlayError> {
        if let Some(s) = &self.silent {
            return Err(PlayError::Usage(s.to_string()));
        }
        if self.remotes.is_empty() {
            // Alone: nobody to hear from.
            return Ok(());
        }
        loop {
            let t0 = Instant::now();
            let Some((from, bytes)) = self.ranks.receive_until(REPORT, Some(t0)) else {
                break;
            };
            let receive_ms = t0.elapsed().as_secs_f64() * 1e3;
            self.take_report(from, &bytes, receive_ms)?;
        }
        for k in 1..=self.remotes.len() {
            if self.remote(k).last_sent.elapsed() >= REPORT_EVERY {
                self.send(k, &Control::Alive);
            }
        }
        let timeout = self.timeout;
        let quiet: Vec<usize> = self
            .remotes
            .iter()
            .filter(|r| r.last_heard.elapsed() > timeout)
            .map(|r| r.rank)
            .collect();
        if !quiet.is_empty() {
            let s = Silent {
                ranks: quiet,
                waited: timeout,
            };
            let e = PlayError::Usage(s.to_string());
            self.silent = Some(s);
            return Err(e);
        }
        Ok(())
    }

    /// One report of rank `from`.
    fn take_report(&mut self, from: usize, bytes: &[u8], receive_ms: f64) -> Result<(), PlayError> {
        if from == 0 || from > self.remotes.len() {
            return Err(PlayError::Usage(format!(
                "a report from rank {from}, which plays no GPU"
            )));
        }
        let (status, pixels) = unpack::<Status>(bytes)
            .map_err(|e| PlayError::Usage(format!("rank {from}'s report: {e}")))?;
        if let Some(e) = &status.error {
            let host = &self.remotes[from - 1].hello.host;
            return Err(PlayError::Usage(format!("rank {from} (on {host}): {e}")));
        }
        let r = self.remote(from);
        r.last_heard = Instant::now();
        if let Some(e) = &status.last_error
            && !r.errors.contains(e)
            && r.errors.len() < ERRORS_KEPT
        {
            r.errors.push(e.clone());
        }
        r.samples.extend(status.samples.iter().cloned());
        for f in &status.faults {
            if r.faults.len() == FAULTS_SENT {
                r.faults.pop_front();
            }
            r.faults.push_back(f.clone());
        }
        if status.generation == r.generation
            && let Some(f) = status.finished
        {
            if pixels.len() as u64 != u64::from(f.width) * u64::from(f.height) * 4 {
                return Err(PlayError::Usage(format!(
                    "rank {from} sent a {}x{} image of {} bytes",
                    f.width,
                    f.height,
                    pixels.len()
                )));
            }
            r.finished.push_back((f, pixels.to_vec(), receive_ms));
        }
        r.status = Status {
            finished: None,
            samples: Vec::new(),
            faults: Vec::new(),
            ..status
        };
        Ok(())
    }
}

impl Workers for RankWorkers {
    fn count(&self) -> usize {
        1 + self.remotes.len()
    }
    fn name(&self, k: usize) -> &GpuName {
        match k {
            0 => self.local.name(),
            _ => &self.remotes[k - 1].name,
        }
    }
    fn player(&self, k: usize) -> Option<&Player> {
        (k == 0).then(|| self.local.player())
    }
    fn player_mut(&mut self, k: usize) -> Option<&mut Player> {
        (k == 0).then(|| self.local.player_mut())
    }
    fn slots(&self, k: usize) -> usize {
        match k {
            0 => self.local.player().slots(),
            _ => self.remotes[k - 1].hello.slots,
        }
    }
    fn frame_time(&self, k: usize, local: u32) -> f64 {
        match k {
            0 => self.local.player().frame_time(local),
            _ => self.remotes[k - 1]
                .hello
                .frame_times
                .get(local as usize)
                .copied()
                .unwrap_or(0.0),
        }
    }
    fn point(&mut self, k: usize, local: u32) {
        if k == 0 {
            return self.local.point(local);
        }
        let r = self.remote(k);
        r.generation += 1;
        r.holding = false;
        r.finished.clear();
        let generation = r.generation;
        self.send(k, &Control::Point { generation, local });
    }
    fn set_playing(&mut self, k: usize, playing: bool) {
        match k {
            0 => self.local.player_mut().set_playing(playing),
            _ => self.send(k, &Control::Playing(playing)),
        }
    }
    fn set_direction(&mut self, k: usize, direction: Direction) {
        match k {
            0 => self.local.player_mut().set_direction(direction),
            _ => self.send(k, &Control::Direction(direction)),
        }
    }
    fn set_mode(&mut self, k: usize, mode: PlayMode) {
        match k {
            0 => self.local.player_mut().set_mode(mode),
            _ => self.send(k, &Control::Mode(mode)),
        }
    }
    fn path_available(&self, k: usize, sel: PathSel) -> Result<(), String> {
        if k == 0 {
            return self.local.path_available(sel);
        }
        let h = &self.remotes[k - 1].hello;
        match sel {
            PathSel::Direct => h.direct.clone(),
            PathSel::Host => h.host_path.clone(),
        }
    }
    fn set_path(&mut self, k: usize, sel: PathSel) -> Result<(), String> {
        if k == 0 {
            return self.local.player_mut().set_path(sel);
        }
        self.path_available(k, sel)?;
        self.send(k, &Control::Path(sel));
        Ok(())
    }
    fn set_view(&mut self, k: usize, view: &View, size: (u32, u32)) {
        if k == 0 {
            return self.local.set_view(view, size);
        }
        // The looks first, each channel that changed: a message each keeps them small.
        let looks: Vec<Option<Look>> = view.attributes.iter().map(Look::of).collect();
        let sent = self.remote(k).looks.take().unwrap_or_default();
        for (index, look) in looks.iter().enumerate() {
            if sent.len() != looks.len() || sent[index] != *look {
                let index = index as u32;
                let look = look.clone();
                self.send(k, &Control::Look { index, look });
            }
        }
        self.remote(k).looks = Some(looks);
        let control = Control::View {
            camera: view.camera,
            settings: view.settings.clone(),
            size,
        };
        self.send(k, &control);
    }
    fn show_attribute(&mut self, k: usize, slot: usize, on: bool) -> Result<(), String> {
        if k == 0 {
            return self.local.player_mut().set_attribute_shown(slot, on);
        }
        self.send(k, &Control::ShowAttribute { slot, on });
        Ok(())
    }
    fn show_dataset_attribute(
        &mut self,
        k: usize,
        attribute: usize,
        on: bool,
    ) -> Result<(), String> {
        if k == 0 {
            return self
                .local
                .player_mut()
                .set_dataset_attribute_shown(attribute, on);
        }
        self.send(k, &Control::ShowDatasetAttribute { attribute, on });
        Ok(())
    }
    fn poll(&mut self, k: usize) -> Result<Option<u32>, PlayError> {
        if k == 0 {
            return self.local.poll();
        }
        self.pump()?;
        let r = self.remote(k);
        if r.holding {
            return Ok(None);
        }
        let local = r.finished.front().map(|(f, ..)| f.local);
        r.holding = local.is_some();
        Ok(local)
    }
    fn take_redrawn(&mut self, k: usize) -> bool {
        k == 0 && self.local.take_redrawn()
    }
    fn go_on(&mut self, k: usize) {
        if k == 0 {
            return self.local.go_on();
        }
        let r = self.remote(k);
        r.holding = false;
        r.finished.pop_front();
        let generation = r.generation;
        self.send(k, &Control::GoOn { generation });
    }
    fn damaged(&self, k: usize) -> Vec<u32> {
        match k {
            0 => self.local.damaged(),
            _ => self.remotes[k - 1].status.damaged.clone(),
        }
    }
    fn frame_bytes(&self, k: usize, local: u32) -> u64 {
        if k == 0 {
            return self.local.player().frame_bytes(local);
        }
        match self.remotes[k - 1].finished.front() {
            Some((f, ..)) if f.local == local => f.bytes,
            _ => 0,
        }
    }
    fn image(&mut self, k: usize) -> Result<Image, PlayError> {
        if k == 0 {
            return self.local.image();
        }
        let r = self.remote(k);
        let (f, rgba8, receive_ms) = r.finished.front_mut().ok_or_else(|| {
            PlayError::Usage(format!("rank {}: no finished image to take", r.rank))
        })?;
        Ok(Image {
            width: f.width,
            height: f.height,
            rgba8: std::mem::take(rgba8),
            transfer_ms: f.readback_ms + *receive_ms,
        })
    }
    fn figures(&self, k: usize, sel: PathSel) -> (PathFigures, String) {
        if k == 0 {
            return self.local.figures(sel);
        }
        let s = &self.remotes[k - 1].status;
        match sel {
            PathSel::Direct => s.direct.clone(),
            PathSel::Host => s.host.clone(),
        }
    }
    fn reset_stats(&mut self, k: usize, sel: PathSel) {
        match k {
            0 => self.local.player_mut().reset_stats(sel),
            _ => self.send(k, &Control::ResetStats(sel)),
        }
    }
    fn wait(&mut self, timeout: Duration) {
        if self.local.holding() {
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
        } else {
            self.local.player_mut().wait(timeout);
        }
        // A failure is kept and returned by the next poll.
        let _ = self.pump();
    }
    fn drain(&mut self, timeout: Duration) {
        self.local.player_mut().drain(timeout);
    }
    fn settle(&mut self) -> Result<(), PlayError> {
        self.nonce += 1;
        let nonce = self.nonce;
        for k in 1..=self.remotes.len() {
            self.send(k, &Control::Report { nonce });
        }
        while self.remotes.iter().any(|r| r.status.nonce != nonce) {
            self.pump()?;
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }
    fn finish(&mut self) {
        for k in 1..=self.remotes.len() {
            self.send(k, &Control::Stop);
        }
        // Every report still under way is taken (a rank's send completes only once rank 0
        // receives it), until each rank's last.
        let deadline = Instant::now() + self.timeout;
        let mut running = self.remotes.len();
        while running > 0 {
            let Some((_, bytes)) = self.ranks.receive_until(REPORT, Some(deadline)) else {
                break;
            };
            if unpack::<Status>(&bytes).is_ok_and(|(s, _)| s.stopped) {
                running -= 1;
            }
        }
    }
    fn silent(&self) -> Option<&Silent> {
        self.silent.as_ref()
    }
    fn ask_sample(&mut self, k: usize, t_s: f64) {
        if k > 0 {
            self.send(k, &Control::Sample { t_s });
        }
    }
    fn take_samples(&mut self, k: usize) -> Vec<SoakSample> {
        match k {
            0 => Vec::new(),
            _ => std::mem::take(&mut self.remote(k).samples),
        }
    }
    fn fault_mark(&self, k: usize) -> (u64, u64) {
        if k == 0 {
            let p = self.local.player();
            return (p.fault_count(), p.recovered_frames());
        }
        let s = &self.remotes[k - 1].status;
        (s.fault_count, s.recovered)
    }
    fn faults_since(&self, k: usize, sel: PathSel, mark: (u64, u64)) -> FaultReport {
        if k == 0 {
            return FaultReport::since(self.local.player(), sel, mark.0, mark.1);
        }
        let r = &self.remotes[k - 1];
        let kept: Vec<&FrameFault> = r.faults.iter().collect();
        let now = (r.status.fault_count, r.status.recovered);
        FaultReport::of_log(&kept, now, sel, mark, r.status.damaged.clone())
    }
    fn errors(&self, k: usize) -> Vec<String> {
        match k {
            0 => self
                .local
                .player()
                .last_error()
                .map(str::to_string)
                .into_iter()
                .collect(),
            _ => self.remotes[k - 1].errors.clone(),
        }
    }
}

/// Why a rank's part of a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RanksPlayError {
    /// This rank's player failed, or a message did not parse.
    #[error(transparent)]
    Play(#[from] PlayError),
    /// Ranks stopped answering: the caller should end the run ([`Ranks::abort`]).
    #[error("{0}: a rank died or stopped answering")]
    Silent(#[from] Silent),
}

/// What a rank other than 0 keeps of its part.
struct Served {
    generation: u64,
    nonce: u64,
    /// Pointed at a frame by rank 0 (it renders nothing before).
    started: bool,
    /// Frames of this generation sent and not yet let go by rank 0 ([`AHEAD`] at most).
    ahead: usize,
    damaged: Vec<u32>,
    /// Faults of its player counted in the reports sent so far.
    faults_sent: u64,
    last_report: Instant,
    /// The samples rank 0 asked for, sent with the next report (every one: two asks may
    /// come before a report, as after a stall).
    samples: Vec<SoakSample>,
    /// Reports with an image posted to rank 0 and not yet taken (at most [`AHEAD`]),
    /// oldest first, each with when it was posted: each keeps its bytes until rank 0 has
    /// them.
    sending: VecDeque<(Posted, Instant)>,
    /// How long rank 0 may take an image ([`serve`]'s timeout).
    timeout: Duration,
}

impl Served {
    fn new(timeout: Duration) -> Served {
        Served {
            timeout,
            generation: 0,
            nonce: 0,
            started: false,
            ahead: 0,
            damaged: Vec::new(),
            faults_sent: 0,
            last_report: Instant::now(),
            samples: Vec::new(),
            sending: VecDeque::new(),
        }
    }
    /// Lets go of the sends rank 0 has taken; `Err` names rank 0 where one has waited
    /// longer than `timeout`.
    fn sends_done(&mut self, timeout: Duration) -> Result<(), Silent> {
        while let Some((p, _)) = self.sending.front_mut()
            && p.done()
        {
            self.sending.pop_front();
        }
        match self.sending.front() {
            Some((_, at)) if at.elapsed() > timeout => Err(Silent {
                ranks: vec![0],
                waited: timeout,
            }),
            _ => Ok(()),
        }
    }
    /// Drives the sends under way until rank 0 has taken them or `deadline` passes: a
    /// transport that moves a large message only while its sender is inside the transport's
    /// calls (Open MPI's shared-memory one) would otherwise move an image a little per tick
    /// (measured on an H100: 120 ms per 8 MB picture, against 15–19 ms sent at once). One
    /// not taken by then stays queued for [`Served::sends_done`] to name rank 0.
    fn drive_sends(&mut self, deadline: Instant) {
        while let Some((p, _)) = self.sending.front_mut() {
            if p.done() {
                self.sending.pop_front();
            } else if Instant::now() >= deadline {
                return;
            } else {
                std::hint::spin_loop();
            }
        }
    }
    /// Waits (at most `timeout`) for the sends under way: before this rank stops.
    fn flush(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        for (p, _) in &mut self.sending {
            // One not taken by then is left to the transport (the run is ending).
            let _ = p.wait_until(Some(deadline));
        }
        self.sending.clear();
    }
}

/// A rank other than 0: plays its GPU's `player` (the GPU `gpu`: its adapter, ordinal and
/// how it was chosen) as rank 0's control messages say, reporting to rank 0 until it says stop. Returns `Err` where this rank's player failed
/// (rank 0 is told first) or rank 0 was silent for twice `timeout`.
pub fn serve(
    ranks: &dyn Ranks,
    player: &mut Player,
    gpu: &GpuName,
    timeout: Duration,
) -> Result<(), RanksPlayError> {
    let hello = Hello {
        adapter: gpu.device.clone(),
        host: ranks.host(),
        local_rank: gpu.ordinal,
        matched: gpu.matched.clone(),
        slots: player.slots(),
        frame_times: (0..player.frame_count())
            .map(|l| player.frame_time(l))
            .collect(),
        direct: path_available(player, PathSel::Direct),
        host_path: path_available(player, PathSel::Host),
    };
    ranks.send(0, HELLO, &pack(&hello, &[]));
    let mut me = Served::new(timeout);
    let out = play_part(ranks, player, &mut me, timeout);
    // Every image posted reaches rank 0 (or the time-out passes) before this rank stops;
    // not where rank 0 is silent: it takes none, and waiting again would name it only after
    // twice the timeout (the run is ended at once, the sends left to MPI).
    if !matches!(out, Err(RanksPlayError::Silent(_))) {
        me.flush(timeout);
    }
    out
}

/// [`serve`]'s loop: rank 0's messages obeyed, frames rendered and sent, until "stop".
fn play_part(
    ranks: &dyn Ranks,
    player: &mut Player,
    me: &mut Served,
    timeout: Duration,
) -> Result<(), RanksPlayError> {
    let mut last_heard = Instant::now();
    loop {
        while let Some((_, bytes)) = ranks.receive_until(CONTROL, Some(Instant::now())) {
            last_heard = Instant::now();
            let (control, _) = unpack::<Control>(&bytes).map_err(PlayError::Usage)?;
            if matches!(control, Control::Stop) {
                let last = Status {
                    stopped: true,
                    ..Status::default()
                };
                ranks.send(0, REPORT, &pack(&last, &[]));
                return Ok(());
            }
            if let Err(e) = obey(player, me, control) {
                report(ranks, player, me, None, &[], Some(e.clone()));
                return Err(PlayError::Usage(e).into());
            }
        }
        if last_heard.elapsed() > 2 * timeout {
            return Err(Silent {
                ranks: vec![0],
                waited: 2 * timeout,
            }
            .into());
        }
        me.sends_done(timeout)?;
        match step(ranks, player, me) {
            Ok(true) => {}
            Ok(false) if me.ahead >= AHEAD || !me.started => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Ok(false) => player.wait(Duration::from_millis(1)),
            Err(e) => {
                report(ranks, player, me, None, &[], Some(e.to_string()));
                return Err(e.into());
            }
        }
    }
}

fn path_available(player: &Player, sel: PathSel) -> Result<(), String> {
    let r = player.path_report(sel);
    if r.available {
        return Ok(());
    }
    Err(r
        .unavailable_reason
        .unwrap_or_else(|| format!("the {} path is unavailable", sel.name())))
}

/// Carries out one of rank 0's control messages.
fn obey(player: &mut Player, me: &mut Served, control: Control) -> Result<(), String> {
    match control {
        Control::Point { generation, local } => {
            me.generation = generation;
            me.ahead = 0;
            me.started = true;
            player.scrub(local);
        }
        Control::Playing(playing) => player.set_playing(playing),
        Control::Direction(direction) => player.set_direction(direction),
        Control::Mode(mode) => player.set_mode(mode),
        // Rank 0's player took the change: a refusal here would leave this rank's pictures
        // unlike rank 0's, so it ends the run with the reason.
        Control::ShowAttribute { slot, on } => player.set_attribute_shown(slot, on)?,
        Control::ShowDatasetAttribute { attribute, on } => {
            player.set_dataset_attribute_shown(attribute, on)?
        }
        Control::Path(sel) => player.set_path(sel)?,
        Control::View {
            camera,
            settings,
            size,
        } => {
            // The size first: a new aspect refits the camera, which rank 0's replaces.
            player.set_size(size.0, size.1);
            let mut view = player.view().clone();
            view.camera = camera;
            view.settings = settings;
            if &view != player.view() {
                *player.view_mut() = view;
            }
        }
        Control::Look { index, look } => {
            let channels = player.view().attributes.len();
            let Some(slot) = player.view().attributes.get(index as usize) else {
                return Err(format!(
                    "rank 0 styles attribute channel {index}; this rank's view has {channels}"
                ));
            };
            let new = look.map(|l| AttributeView {
                enabled: l.enabled,
                tf: l.tf,
            });
            if *slot != new {
                player.view_mut().attributes[index as usize] = new;
            }
        }
        Control::GoOn { generation } => {
            if generation == me.generation {
                me.ahead = me.ahead.saturating_sub(1);
            }
        }
        Control::ResetStats(sel) => player.reset_stats(sel),
        Control::Report { nonce } => {
            me.nonce = nonce;
            // Reported by the next step.
            me.last_report = Instant::now() - REPORT_EVERY;
        }
        Control::Sample { t_s } => {
            me.samples.push(super::soak::sample(player, t_s));
            me.last_report = Instant::now() - REPORT_EVERY;
        }
        Control::Alive | Control::Stop => {}
    }
    Ok(())
}

/// Plays on unless [`AHEAD`] frames wait on rank 0; sends a frame rendered (with its image), or a report
/// when the damaged frames changed or it is due. Returns whether a frame was rendered.
fn step(ranks: &dyn Ranks, player: &mut Player, me: &mut Served) -> Result<bool, PlayError> {
    if me.started
        && me.ahead < AHEAD
        && me.sending.len() < AHEAD
        && let Some(local) = player.tick()?.shown
    {
        // The render finished first: the figure is the read back alone.
        player
            .device()
            .poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: None,
            })
            .map_err(|e| PlayError::Usage(format!("waiting for a render: {e}")))?;
        let t0 = Instant::now();
        // The picture alone: rank 0 shows it, and the linear image would be 4 times the bytes.
        let image = player.read_picture()?;
        let finished = Finished {
            local,
            bytes: player.frame_bytes(local),
            width: image.width,
            height: image.height,
            readback_ms: t0.elapsed().as_secs_f64() * 1e3,
        };
        me.ahead += 1;
        report(ranks, player, me, Some(finished), &image.rgba8, None);
        me.drive_sends(Instant::now() + me.timeout);
        return Ok(true);
    }
    let damaged: Vec<u32> = player.damaged_frames().keys().copied().collect();
    let faulted = player.fault_count() != me.faults_sent;
    if damaged != me.damaged || faulted || me.last_report.elapsed() >= REPORT_EVERY {
        me.damaged = damaged;
        report(ranks, player, me, None, &[], None);
    }
    Ok(false)
}

/// Sends rank 0 a report; one with a finished frame's image is posted (an immediate send:
/// this rank renders on while rank 0 takes it) and kept in `me.sending` until it is done.
fn report(
    ranks: &dyn Ranks,
    player: &Player,
    me: &mut Served,
    finished: Option<Finished>,
    pixels: &[u8],
    error: Option<String>,
) {
    let figures = |sel| (player.figures(sel), player.path_report(sel).label);
    // The faults met since the last report (the player keeps the latest).
    let fault_count = player.fault_count();
    let new = (fault_count - me.faults_sent).min(FAULTS_SENT as u64) as usize;
    let kept = player.faults();
    let faults: Vec<FrameFault> = kept
        .skip(player.faults().len().saturating_sub(new))
        .cloned()
        .collect();
    me.faults_sent = fault_count;
    let status = Status {
        generation: me.generation,
        nonce: me.nonce,
        finished,
        damaged: player.damaged_frames().keys().copied().collect(),
        direct: figures(PathSel::Direct),
        host: figures(PathSel::Host),
        error,
        stopped: false,
        samples: std::mem::take(&mut me.samples),
        last_error: player.last_error().map(str::to_string),
        faults,
        fault_count,
        recovered: player.recovered_frames(),
    };
    let bytes = pack(&status, pixels);
    if pixels.is_empty() {
        ranks.send(0, REPORT, &bytes);
    } else {
        me.sending
            .push_back((ranks.post(0, REPORT, bytes), Instant::now()));
    }
    me.last_report = Instant::now();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_travel_whole_and_short_ones_are_refused() {
        let control = Control::Point {
            generation: 3,
            local: 7,
        };
        let bytes = pack(&control, &[1, 2, 3]);
        let (back, tail) = unpack::<Control>(&bytes).unwrap();
        assert!(matches!(
            back,
            Control::Point {
                generation: 3,
                local: 7
            }
        ));
        assert_eq!(tail, &[1, 2, 3]);
        assert!(unpack::<Control>(&bytes[..6]).is_err());
        assert!(unpack::<Control>(&bytes[..2]).is_err());
        // A view's message stays small (MPI sends it eagerly).
        let view = pack(
            &Control::View {
                camera: Camera::default(),
                settings: RenderSettings::default(),
                size: (1920, 1080),
            },
            &[],
        );
        assert!(view.len() < 4096, "{} bytes", view.len());
        // So does a look (a channel each).
        let look = pack(
            &Control::Look {
                index: 2,
                look: Some(Look {
                    enabled: true,
                    tf: TransferFunction::preset("rain", [0.0, 1.0], 1000.0),
                }),
            },
            &[],
        );
        assert!(look.len() < 4096, "{} bytes", look.len());
        let (back, _) = unpack::<Control>(&look).unwrap();
        assert!(matches!(back, Control::Look { index: 2, look: Some(l) } if l.enabled));
    }

    /// A send rank 0 takes after a while.
    struct TakenAfter(u32);
    impl crate::cluster::Pending for TakenAfter {
        fn test(&mut self) -> bool {
            self.0 = self.0.saturating_sub(1);
            self.0 == 0
        }
    }

    #[test]
    fn posted_images_are_kept_until_taken_and_a_send_never_taken_names_rank_0() {
        let timeout = Duration::from_millis(50);
        let mut me = Served::new(timeout);
        me.sending
            .push_back((Posted::pending(Box::new(TakenAfter(2))), Instant::now()));
        me.sending.push_back((Posted::completed(), Instant::now()));
        assert!(me.sends_done(timeout).is_ok());
        assert_eq!(me.sending.len(), 2, "kept until rank 0 takes it, in order");
        assert!(me.sends_done(timeout).is_ok());
        assert!(me.sending.is_empty());
        let never = Posted::pending(Box::new(TakenAfter(u32::MAX)));
        me.sending.push_back((never, Instant::now() - 2 * timeout));
        let silent = me.sends_done(timeout).expect_err("rank 0 took nothing");
        assert_eq!(silent.ranks, [0]);
        me.sending.clear();
    }
}
