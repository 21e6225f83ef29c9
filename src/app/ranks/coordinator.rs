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

/// What rank 0 knows of one GPU of another rank (one of its slots).
struct Remote {
    rank: usize,
    /// Its place among the rank's GPUs.
    slot: usize,
    name: GpuName,
    /// The rank's host.
    host: String,
    hello: SlotHello,
    generation: u64,
    holding: bool,
    /// The frames of this generation the GPU finished and rank 0 has not let go, oldest
    /// first: each with its pixels and the ms its receipt took. The GPU runs ahead by at
    /// most [`super::AHEAD`] of them, so its renders overlap rank 0's presentation.
    finished: VecDeque<(Finished, Vec<u8>, f64)>,
    status: Status,
    /// Samples of its process (`--soak`), not yet taken: the rank's first slot carries them.
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

/// The GPUs of a run across ranks, as rank 0's coordinator sees them: worker `j` is
/// (rank `r`, slot `s`) in rank order then slot order, every rank playing as many GPUs as
/// rank 0 (`--gpus` names them on each rank; one, the local rank's, without it). Rank 0's
/// slots come first: its players in this process. See the module documentation.
pub struct RankWorkers {
    ranks: Rc<dyn Ranks>,
    locals: Vec<LocalGpu>,
    remotes: Vec<Remote>,
    timeout: Duration,
    nonce: u64,
    silent: Option<Silent>,
}

impl RankWorkers {
    /// Rank 0's GPUs: `locals` (this process's players, its slots) and every other rank's,
    /// whose hellos it waits for (at most `timeout`, else the silent ranks are named). A
    /// rank that plays another number of GPUs than rank 0 is refused by name: the frames
    /// are dealt over ranks × GPUs, so every rank must play as many.
    pub fn connect(
        ranks: Rc<dyn Ranks>,
        locals: Vec<LocalGpu>,
        timeout: Duration,
    ) -> Result<RankWorkers, RanksPlayError> {
        if locals.is_empty() {
            return Err(PlayError::Usage("rank 0 plays no GPU".into()).into());
        }
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
        let hellos: Vec<(usize, Hello)> = hellos
            .into_iter()
            .enumerate()
            .skip(1)
            .map(|(rank, h)| (rank, h.expect("every hello arrived")))
            .collect();
        check_gpu_counts(locals.len(), &hellos)?;
        let now = Instant::now();
        let remotes = hellos
            .into_iter()
            .flat_map(|(rank, hello)| {
                let host = hello.host.clone();
                hello
                    .gpus
                    .into_iter()
                    .enumerate()
                    .map(move |(slot, g)| Remote {
                        rank,
                        slot,
                        name: GpuName {
                            ordinal: g.ordinal,
                            matched: g.matched.clone(),
                            device: g.adapter.clone(),
                            host: Some(host.clone()),
                            rank: Some(rank),
                        },
                        host: host.clone(),
                        hello: g,
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
                    })
            })
            .collect();
        Ok(RankWorkers {
            ranks,
            locals,
            remotes,
            timeout,
            nonce: 0,
            silent: None,
        })
    }

    /// Worker `k`'s place among the other ranks' GPUs; `None`: one of rank 0's.
    fn remote_index(&self, k: usize) -> Option<usize> {
        k.checked_sub(self.locals.len())
    }

    fn remote(&mut self, k: usize) -> &mut Remote {
        let i = k - self.locals.len();
        &mut self.remotes[i]
    }

    fn remote_ref(&self, k: usize) -> &Remote {
        &self.remotes[k - self.locals.len()]
    }

    /// The other ranks, once each (their first slot's worker index), in rank order.
    fn rank_firsts(&self) -> Vec<usize> {
        let l = self.locals.len();
        (0..self.remotes.len())
            .filter(|&i| self.remotes[i].slot == 0)
            .map(|i| l + i)
            .collect()
    }

    /// Sends `control` to worker `k` (a GPU of another rank), waiting for it to be taken at
    /// most until that rank would be named silent anyway: once a stopped rank's MPI buffers
    /// are full, a blocking send would hold rank 0 for ever (it did with a rank SIGSTOPped
    /// and a 20 s timeout). A message not taken by then names the rank silent (the run then
    /// ends).
    fn send(&mut self, k: usize, control: &Control) {
        let ranks = self.ranks.clone();
        let timeout = self.timeout;
        let r = self.remote(k);
        let message = ToSlot {
            slot: r.slot as u32,
            control: control.clone(),
        };
        let bytes = pack(&message, &[]);
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
    /// longer than the timeout (every GPU of a silent rank stops with it: the run ends).
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
        let l = self.locals.len();
        for k in l..l + self.remotes.len() {
            if self.remote(k).last_sent.elapsed() >= REPORT_EVERY {
                self.send(k, &Control::Alive);
            }
        }
        let timeout = self.timeout;
        let heard: Vec<(usize, Instant)> = self
            .remotes
            .iter()
            .map(|r| (r.rank, r.last_heard))
            .collect();
        let quiet = quiet_ranks(&heard, timeout);
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

    /// One report of rank `from` (about one of its GPUs, the report's slot).
    fn take_report(&mut self, from: usize, bytes: &[u8], receive_ms: f64) -> Result<(), PlayError> {
        let (status, pixels) = unpack::<Status>(bytes)
            .map_err(|e| PlayError::Usage(format!("rank {from}'s report: {e}")))?;
        let slot = status.slot as usize;
        let Some(i) = self
            .remotes
            .iter()
            .position(|r| r.rank == from && r.slot == slot)
        else {
            return Err(PlayError::Usage(format!(
                "a report from rank {from} about its GPU {slot}, which it does not play"
            )));
        };
        let r = &mut self.remotes[i];
        if let Some(e) = &status.error {
            let host = &r.host;
            return Err(PlayError::Usage(format!(
                "rank {from} (on {host}, its GPU {slot}): {e}"
            )));
        }
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

/// The ranks not heard from for longer than `timeout`, each once, in rank order, from when
/// each of their GPUs was last heard of (`heard`: rank, instant; in rank order). A report
/// about any one GPU of a rank shows the rank alive: one loop serves all of its GPUs.
fn quiet_ranks(heard: &[(usize, Instant)], timeout: Duration) -> Vec<usize> {
    let mut quiet: Vec<usize> = Vec::new();
    for (i, &(rank, _)) in heard.iter().enumerate() {
        let first = i == 0 || heard[i - 1].0 != rank;
        let latest = heard
            .iter()
            .filter(|(r, _)| *r == rank)
            .map(|(_, at)| *at)
            .max();
        if first && latest.is_some_and(|at| at.elapsed() > timeout) {
            quiet.push(rank);
        }
    }
    quiet
}

/// Every other rank must play as many GPUs as rank 0 (`per_rank`): the frames are dealt
/// over ranks × GPUs, which each rank worked out from its own count.
fn check_gpu_counts(per_rank: usize, hellos: &[(usize, Hello)]) -> Result<(), PlayError> {
    for (rank, hello) in hellos {
        let n = hello.gpus.len();
        if n != per_rank {
            return Err(PlayError::Usage(format!(
                "rank {rank} (on {}) plays {n} GPU(s), rank 0 plays {per_rank}: every rank \
                 must play as many (give each rank the same --gpus)",
                hello.host
            )));
        }
    }
    Ok(())
}

impl Workers for RankWorkers {
    fn count(&self) -> usize {
        self.locals.len() + self.remotes.len()
    }
    fn name(&self, k: usize) -> &GpuName {
        match self.locals.get(k) {
            Some(g) => g.name(),
            None => &self.remote_ref(k).name,
        }
    }
    fn player(&self, k: usize) -> Option<&Player> {
        self.locals.get(k).map(LocalGpu::player)
    }
    fn player_mut(&mut self, k: usize) -> Option<&mut Player> {
        self.locals.get_mut(k).map(LocalGpu::player_mut)
    }
    fn slots(&self, k: usize) -> usize {
        match self.locals.get(k) {
            Some(g) => g.player().slots(),
            None => self.remote_ref(k).hello.ring_slots,
        }
    }
    fn frame_time(&self, k: usize, local: u32) -> f64 {
        match self.locals.get(k) {
            Some(g) => g.player().frame_time(local),
            None => self
                .remote_ref(k)
                .hello
                .frame_times
                .get(local as usize)
                .copied()
                .unwrap_or(0.0),
        }
    }
    fn point(&mut self, k: usize, local: u32) {
        if let Some(g) = self.locals.get_mut(k) {
            return g.point(local);
        }
        let r = self.remote(k);
        r.generation += 1;
        r.holding = false;
        r.finished.clear();
        let generation = r.generation;
        self.send(k, &Control::Point { generation, local });
    }
    fn set_playing(&mut self, k: usize, playing: bool) {
        match self.locals.get_mut(k) {
            Some(g) => g.player_mut().set_playing(playing),
            None => self.send(k, &Control::Playing(playing)),
        }
    }
    fn set_direction(&mut self, k: usize, direction: Direction) {
        match self.locals.get_mut(k) {
            Some(g) => g.player_mut().set_direction(direction),
            None => self.send(k, &Control::Direction(direction)),
        }
    }
    fn set_mode(&mut self, k: usize, mode: PlayMode) {
        match self.locals.get_mut(k) {
            Some(g) => g.player_mut().set_mode(mode),
            None => self.send(k, &Control::Mode(mode)),
        }
    }
    fn path_available(&self, k: usize, sel: PathSel) -> Result<(), String> {
        if let Some(g) = self.locals.get(k) {
            return g.path_available(sel);
        }
        let h = &self.remote_ref(k).hello;
        match sel {
            PathSel::Direct => h.direct.clone(),
            PathSel::Host => h.host_path.clone(),
        }
    }
    fn set_path(&mut self, k: usize, sel: PathSel) -> Result<(), String> {
        if let Some(g) = self.locals.get_mut(k) {
            return g.player_mut().set_path(sel);
        }
        self.path_available(k, sel)?;
        self.send(k, &Control::Path(sel));
        Ok(())
    }
    fn set_view(&mut self, k: usize, view: &View, size: (u32, u32)) {
        if let Some(g) = self.locals.get_mut(k) {
            return g.set_view(view, size);
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
        if let Some(g) = self.locals.get_mut(k) {
            return g.player_mut().set_attribute_shown(slot, on);
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
        if let Some(g) = self.locals.get_mut(k) {
            return g.player_mut().set_dataset_attribute_shown(attribute, on);
        }
        self.send(k, &Control::ShowDatasetAttribute { attribute, on });
        Ok(())
    }
    fn poll(&mut self, k: usize) -> Result<Option<u32>, PlayError> {
        if let Some(g) = self.locals.get_mut(k) {
            return g.poll();
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
        self.locals.get_mut(k).is_some_and(LocalGpu::take_redrawn)
    }
    fn go_on(&mut self, k: usize) {
        if let Some(g) = self.locals.get_mut(k) {
            return g.go_on();
        }
        let r = self.remote(k);
        r.holding = false;
        r.finished.pop_front();
        let generation = r.generation;
        self.send(k, &Control::GoOn { generation });
    }
    fn damaged(&self, k: usize) -> Vec<u32> {
        match self.locals.get(k) {
            Some(g) => g.damaged(),
            None => self.remote_ref(k).status.damaged.clone(),
        }
    }
    fn frame_bytes(&self, k: usize, local: u32) -> u64 {
        if let Some(g) = self.locals.get(k) {
            return g.player().frame_bytes(local);
        }
        match self.remote_ref(k).finished.front() {
            Some((f, ..)) if f.local == local => f.bytes,
            _ => 0,
        }
    }
    fn image(&mut self, k: usize) -> Result<Image, PlayError> {
        if let Some(g) = self.locals.get_mut(k) {
            return g.image();
        }
        let r = self.remote(k);
        let (f, rgba8, receive_ms) = r.finished.front_mut().ok_or_else(|| {
            PlayError::Usage(format!(
                "rank {} (its GPU {}): no finished image to take",
                r.rank, r.slot
            ))
        })?;
        Ok(Image {
            width: f.width,
            height: f.height,
            rgba8: std::mem::take(rgba8),
            transfer_ms: f.readback_ms + *receive_ms,
        })
    }
    fn figures(&self, k: usize, sel: PathSel) -> (PathFigures, String) {
        if let Some(g) = self.locals.get(k) {
            return g.figures(sel);
        }
        let s = &self.remote_ref(k).status;
        match sel {
            PathSel::Direct => s.direct.clone(),
            PathSel::Host => s.host.clone(),
        }
    }
    fn reset_stats(&mut self, k: usize, sel: PathSel) {
        match self.locals.get_mut(k) {
            Some(g) => g.player_mut().reset_stats(sel),
            None => self.send(k, &Control::ResetStats(sel)),
        }
    }
    fn wait(&mut self, timeout: Duration) {
        match self.locals.iter_mut().find(|g| !g.holding()) {
            Some(g) => g.player_mut().wait(timeout),
            None => std::thread::sleep(timeout.min(Duration::from_millis(1))),
        }
        // A failure is kept and returned by the next poll.
        let _ = self.pump();
    }
    fn drain(&mut self, timeout: Duration) {
        for g in &mut self.locals {
            g.player_mut().drain(timeout);
        }
    }
    fn settle(&mut self) -> Result<(), PlayError> {
        self.nonce += 1;
        let nonce = self.nonce;
        let l = self.locals.len();
        for k in l..l + self.remotes.len() {
            self.send(k, &Control::Report { nonce });
        }
        while self.remotes.iter().any(|r| r.status.nonce != nonce) {
            self.pump()?;
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }
    fn finish(&mut self) {
        // "Stop" is a rank's: it stops every GPU it plays and answers once.
        let firsts = self.rank_firsts();
        for &k in &firsts {
            self.send(k, &Control::Stop);
        }
        // Every report still under way is taken (a rank's send completes only once rank 0
        // receives it), until each rank's last.
        let deadline = Instant::now() + self.timeout;
        let mut running = firsts.len();
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
        // A sample is a process's: asked of each other rank once, through its first GPU.
        if self.remote_index(k).is_some() && self.remote(k).slot == 0 {
            self.send(k, &Control::Sample { t_s });
        }
    }
    fn take_samples(&mut self, k: usize) -> Vec<SoakSample> {
        match self.remote_index(k) {
            None => Vec::new(),
            Some(_) => std::mem::take(&mut self.remote(k).samples),
        }
    }
    fn fault_mark(&self, k: usize) -> (u64, u64) {
        if let Some(g) = self.locals.get(k) {
            let p = g.player();
            return (p.fault_count(), p.recovered_frames());
        }
        let s = &self.remote_ref(k).status;
        (s.fault_count, s.recovered)
    }
    fn faults_since(&self, k: usize, sel: PathSel, mark: (u64, u64)) -> FaultReport {
        if let Some(g) = self.locals.get(k) {
            return FaultReport::since(g.player(), sel, mark.0, mark.1);
        }
        let r = self.remote_ref(k);
        let kept: Vec<&FrameFault> = r.faults.iter().collect();
        let now = (r.status.fault_count, r.status.recovered);
        FaultReport::of_log(&kept, now, sel, mark, r.status.damaged.clone())
    }
    fn errors(&self, k: usize) -> Vec<String> {
        match self.locals.get(k) {
            Some(g) => g
                .player()
                .last_error()
                .map(str::to_string)
                .into_iter()
                .collect(),
            None => self.remote_ref(k).errors.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(host: &str, gpus: usize) -> Hello {
        let slot = SlotHello {
            adapter: "lavapipe".into(),
            ordinal: 0,
            matched: String::new(),
            ring_slots: 2,
            frame_times: vec![0.0],
            direct: Ok(()),
            host_path: Ok(()),
        };
        Hello {
            host: host.into(),
            local_rank: 0,
            gpus: vec![slot; gpus],
        }
    }

    /// A rank is silent once none of its GPUs was heard of within the timeout, and it is
    /// named once however many GPUs it plays.
    #[test]
    fn a_rank_is_named_silent_once_and_only_when_all_its_gpus_are_quiet() {
        let timeout = Duration::from_millis(50);
        let (old, now) = (Instant::now() - 2 * timeout, Instant::now());
        assert_eq!(quiet_ranks(&[(1, old), (1, old), (2, now)], timeout), [1]);
        assert!(quiet_ranks(&[(1, old), (1, now)], timeout).is_empty());
        assert_eq!(
            quiet_ranks(&[(1, old), (1, old), (2, old), (2, old)], timeout),
            [1, 2]
        );
    }

    /// Every rank deals the frames over ranks × its own GPU count: a rank that plays
    /// another number of GPUs than rank 0 (an MPMD launch giving ranks different `--gpus`)
    /// would own other frames than the coordinator thinks, so it is refused by name.
    #[test]
    fn a_rank_playing_another_number_of_gpus_than_rank_0_is_refused_by_name() {
        let same = [(1, hello("a", 2)), (2, hello("b", 2))];
        assert!(check_gpu_counts(2, &same).is_ok());
        let other = [(1, hello("a", 2)), (2, hello("b", 1))];
        let e = check_gpu_counts(2, &other).unwrap_err().to_string();
        assert!(
            e.contains("rank 2 (on b) plays 1 GPU(s), rank 0 plays 2"),
            "{e}"
        );
        assert!(e.contains("--gpus"), "{e}");
    }
}
