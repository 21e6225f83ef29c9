//! Rank 0's side of a run across ranks (see [`super`]): [`RankWorkers`], the coordinator's
//! GPUs over ranks.

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::messages::*;
use super::{REPORT_EVERY, RanksPlayError};
use crate::app::config::{PathSel, PlayError};
use crate::app::core::Player;
use crate::app::faults::FrameFault;
use crate::app::gpus::{GpuName, Image, LocalGpu, Workers};
use crate::app::headless::FaultReport;
use crate::app::soak::SoakSample;
use crate::app::stats::PathFigures;
use crate::cluster::{Ranks, Silent};
use crate::pipeline::{Direction, PlayMode};
use crate::render::View;

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
