//! Steps the ranks take together that give up on a silent rank: a start barrier and a
//! gather of results on rank 0, each bounded by a wait, built on point-to-point messages
//! (a collective call cannot be abandoned once entered, and does not say who is missing).
//! A rank that died or stopped answering is named by the ranks that waited for it, which
//! can then stop the run ([`super::Ranks::abort`]) instead of hanging.

use std::time::{Duration, Instant};

use super::Ranks;

/// Tags of the messages, one per step, so a late message of one step is never taken for
/// another's.
const READY: i32 = 0x5c01;
const GO: i32 = 0x5c02;
const REPORT: i32 = 0x5c03;
const RECEIVED: i32 = 0x5c04;

/// The ranks that did not answer in time, and how long they were waited for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{} did not answer within {:.1} s", ranks_text(.ranks), .waited.as_secs_f64())]
pub struct Silent {
    /// The silent ranks, ascending.
    pub ranks: Vec<usize>,
    /// How long they were waited for.
    pub waited: Duration,
}

fn ranks_text(ranks: &[usize]) -> String {
    let list: Vec<String> = ranks.iter().map(usize::to_string).collect();
    match ranks {
        [_] => format!("rank {}", list[0]),
        _ => format!("ranks {}", list.join(", ")),
    }
}

/// Rank 0 waits for `tag` from every other rank, until `wait` has passed (`None`: as long
/// as it takes); the messages by sender, or the ranks still silent.
pub(super) fn hear_from_all(
    ranks: &dyn Ranks,
    tag: i32,
    wait: Option<Duration>,
) -> Result<Vec<Option<Vec<u8>>>, Silent> {
    let deadline = wait.map(|w| Instant::now() + w);
    let mut heard: Vec<Option<Vec<u8>>> = vec![None; ranks.size()];
    let mut missing = ranks.size() - 1;
    while missing > 0 {
        let Some((from, bytes)) = ranks.receive_until(tag, deadline) else {
            return Err(Silent {
                ranks: (1..ranks.size()).filter(|&r| heard[r].is_none()).collect(),
                waited: wait.unwrap_or_default(),
            });
        };
        if from != 0 && from < heard.len() && heard[from].is_none() {
            heard[from] = Some(bytes);
            missing -= 1;
        }
    }
    Ok(heard)
}

/// A rank other than 0 waits for rank 0's `tag` (its bytes): twice `wait`, since rank 0
/// itself may wait `wait` for the slowest rank before it answers.
pub(super) fn hear_from_rank_zero(
    ranks: &dyn Ranks,
    tag: i32,
    wait: Option<Duration>,
) -> Result<Vec<u8>, Silent> {
    let deadline = wait.map(|w| Instant::now() + 2 * w);
    match ranks.receive_until(tag, deadline) {
        Some((_, bytes)) => Ok(bytes),
        None => Err(Silent {
            ranks: vec![0],
            waited: 2 * wait.unwrap_or_default(),
        }),
    }
}

/// As [`Ranks::barrier`], but no rank waits longer than `wait` for the others (rank 0) or
/// twice that for rank 0 (the others): `Err` names who was silent.
pub fn barrier_within(ranks: &dyn Ranks, wait: Option<Duration>) -> Result<(), Silent> {
    if ranks.size() == 1 {
        return Ok(());
    }
    if ranks.rank() == 0 {
        hear_from_all(ranks, READY, wait)?;
        for r in 1..ranks.size() {
            ranks.send(r, GO, &[]);
        }
        Ok(())
    } else {
        ranks.send(0, READY, &[]);
        hear_from_rank_zero(ranks, GO, wait).map(|_| ())
    }
}

/// As [`Ranks::gather`] (every rank's bytes in rank order on rank 0, `None` elsewhere),
/// but rank 0 waits at most `wait` for the others and they at most twice that for rank 0
/// to confirm: `Err` names who was silent.
pub fn gather_within(
    ranks: &dyn Ranks,
    mine: &[u8],
    wait: Option<Duration>,
) -> Result<Option<Vec<Vec<u8>>>, Silent> {
    if ranks.size() == 1 {
        return Ok(Some(vec![mine.to_vec()]));
    }
    if ranks.rank() == 0 {
        let mut heard = hear_from_all(ranks, REPORT, wait)?;
        heard[0] = Some(mine.to_vec());
        for r in 1..ranks.size() {
            ranks.send(r, RECEIVED, &[]);
        }
        Ok(Some(
            heard.into_iter().map(Option::unwrap_or_default).collect(),
        ))
    } else {
        ranks.send(0, REPORT, mine);
        hear_from_rank_zero(ranks, RECEIVED, wait)?;
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::threads;

    const WAIT: Option<Duration> = Some(Duration::from_millis(300));

    #[test]
    fn every_rank_passes_the_barrier_and_rank_zero_gathers_in_order() {
        let out: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = threads::ranks(3, 3)
                .into_iter()
                .map(|r| {
                    s.spawn(move || {
                        barrier_within(&r, WAIT).unwrap();
                        gather_within(&r, &[r.rank() as u8 * 3], WAIT).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(out[0], Some(vec![vec![0], vec![3], vec![6]]));
        assert!(out[1].is_none() && out[2].is_none());
    }

    #[test]
    fn rank_zero_names_the_ranks_that_never_came_and_stops_waiting() {
        let started = Instant::now();
        let out: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = threads::ranks(4, 4)
                .into_iter()
                .map(|r| {
                    s.spawn(move || match r.rank() {
                        // Ranks 1 and 3 died before the start.
                        1 | 3 => None,
                        _ => Some(barrier_within(&r, WAIT)),
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let err = out[0].clone().unwrap().unwrap_err();
        assert_eq!(err.ranks, vec![1, 3]);
        assert_eq!(err.to_string(), "ranks 1, 3 did not answer within 0.3 s");
        // Rank 2 hears nothing from rank 0 (which gave up) and names it in turn.
        assert_eq!(out[2].clone().unwrap().unwrap_err().ranks, vec![0]);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn the_others_name_rank_zero_when_it_never_gathers() {
        let out: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = threads::ranks(2, 2)
                .into_iter()
                .map(|r| s.spawn(move || (r.rank() == 1).then(|| gather_within(&r, b"x", WAIT))))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        });
        let err = out[1].clone().unwrap().unwrap_err();
        assert_eq!(err.to_string(), "rank 0 did not answer within 0.6 s");
    }

    #[test]
    fn one_rank_alone_never_waits() {
        let solo = crate::cluster::Solo;
        assert_eq!(barrier_within(&solo, WAIT), Ok(()));
        assert_eq!(
            gather_within(&solo, b"a", WAIT),
            Ok(Some(vec![b"a".to_vec()]))
        );
    }
}
