//! A serving rank's side of a run across ranks (see [`super`]): [`serve`], which plays its
//! GPU as rank 0's control messages say and reports back.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::messages::*;
use super::{AHEAD, REPORT_EVERY, RanksPlayError};
use crate::app::config::{PathSel, PlayError};
use crate::app::core::Player;
use crate::app::faults::FrameFault;
use crate::app::gpus::LocalGpu;
use crate::app::soak::SoakSample;
use crate::cluster::{Posted, Ranks, Silent};
use crate::render::AttributeView;

/// What a rank other than 0 keeps of one GPU it plays (a slot).
struct Served {
    /// Its place among the rank's GPUs, in its reports.
    slot: u32,
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
    fn new(slot: u32, timeout: Duration) -> Served {
        Served {
            slot,
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

/// A rank other than 0: plays its GPUs `gpus` (one unless `--gpus` names several within
/// the rank; each its player, adapter, ordinal and how it was chosen, in slot order) as
/// rank 0's control messages say, each message to its slot, reporting to rank 0 per slot
/// until it says stop. Returns `Err` where one of this rank's players failed (rank 0 is
/// told first) or rank 0 was silent for twice `timeout`.
pub fn serve(
    ranks: &dyn Ranks,
    gpus: &mut [LocalGpu],
    timeout: Duration,
) -> Result<(), RanksPlayError> {
    let hello = Hello {
        host: ranks.host(),
        local_rank: ranks.local_rank(),
        gpus: gpus
            .iter()
            .map(|g| {
                let player = g.player();
                SlotHello {
                    adapter: g.name().device.clone(),
                    ordinal: g.name().ordinal,
                    matched: g.name().matched.clone(),
                    ring_slots: player.slots(),
                    frame_times: (0..player.frame_count())
                        .map(|l| player.frame_time(l))
                        .collect(),
                    direct: path_available(player, PathSel::Direct),
                    host_path: path_available(player, PathSel::Host),
                }
            })
            .collect(),
    };
    ranks.send(0, HELLO, &pack(&hello, &[]));
    let mut served: Vec<Served> = (0..gpus.len())
        .map(|s| Served::new(s as u32, timeout))
        .collect();
    let out = play_part(ranks, gpus, &mut served, timeout);
    // Every image posted reaches rank 0 (or the time-out passes) before this rank stops;
    // not where rank 0 is silent: it takes none, and waiting again would name it only after
    // twice the timeout (the run is ended at once, the sends left to MPI).
    if !matches!(out, Err(RanksPlayError::Silent(_))) {
        for me in &mut served {
            me.flush(timeout);
        }
    }
    out
}

/// [`serve`]'s loop: rank 0's messages obeyed, each by its slot, frames rendered and sent,
/// until "stop".
fn play_part(
    ranks: &dyn Ranks,
    gpus: &mut [LocalGpu],
    served: &mut [Served],
    timeout: Duration,
) -> Result<(), RanksPlayError> {
    let mut last_heard = Instant::now();
    loop {
        while let Some((_, bytes)) = ranks.receive_until(CONTROL, Some(Instant::now())) {
            last_heard = Instant::now();
            let (ToSlot { slot, control }, _) =
                unpack::<ToSlot>(&bytes).map_err(PlayError::Usage)?;
            if matches!(control, Control::Stop) {
                let last = Status {
                    stopped: true,
                    ..Status::default()
                };
                ranks.send(0, REPORT, &pack(&last, &[]));
                return Ok(());
            }
            if let Control::Sample { t_s } = control {
                // A sample is this process's, every GPU's player in it; the first slot's
                // next report carries it.
                let players: Vec<&Player> = gpus.iter().map(LocalGpu::player).collect();
                served[0]
                    .samples
                    .push(crate::app::soak::sample_players(&players, t_s));
                served[0].last_report = Instant::now() - REPORT_EVERY;
                continue;
            }
            let count = gpus.len();
            let (Some(gpu), Some(me)) =
                (gpus.get_mut(slot as usize), served.get_mut(slot as usize))
            else {
                let e = format!("rank 0 addressed GPU {slot} of this rank, which plays {count}");
                report(
                    ranks,
                    gpus[0].player(),
                    &mut served[0],
                    None,
                    &[],
                    Some(e.clone()),
                );
                return Err(PlayError::Usage(e).into());
            };
            if let Err(e) = obey(gpu.player_mut(), me, control) {
                report(ranks, gpu.player(), me, None, &[], Some(e.clone()));
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
        let mut rendered = false;
        for (gpu, me) in gpus.iter_mut().zip(served.iter_mut()) {
            me.sends_done(timeout)?;
            match step(ranks, gpu.player_mut(), me) {
                Ok(r) => rendered |= r,
                Err(e) => {
                    report(ranks, gpu.player(), me, None, &[], Some(e.to_string()));
                    return Err(e.into());
                }
            }
        }
        if !rendered {
            // Wait on a GPU that may render next; none may: sleep a little.
            let next = gpus
                .iter_mut()
                .zip(served.iter())
                .find(|(_, me)| me.started && me.ahead < AHEAD);
            match next {
                Some((gpu, _)) => gpu.player_mut().wait(Duration::from_millis(1)),
                None => std::thread::sleep(Duration::from_millis(1)),
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
        // A rank's own, handled by [`play_part`].
        Control::Sample { .. } | Control::Alive | Control::Stop => {}
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
        slot: me.slot,
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
        let mut me = Served::new(0, timeout);
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
