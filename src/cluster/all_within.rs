//! Every rank's bytes on every rank, and rank 0's word to every rank, with no rank waiting
//! without end for another: the bounded forms of [`Ranks::all_gather`] and of a broadcast
//! that steps taken together many times (the rounds of a write shared by ranks) need, so
//! that a rank that died or stopped answering is named instead of holding the others in a
//! collective call that cannot be abandoned. Built, as `within`'s steps, on point-to-point
//! messages with deadlines.

use std::time::Duration;

use super::Ranks;
use super::within::{Silent, hear_from_all, hear_from_rank_zero};

/// Tags of the two steps (distinct from `within`'s, so no message of one step is taken for
/// another's).
const CONTRIBUTE: i32 = 0x5c11;
const EVERYONE: i32 = 0x5c12;
const DECIDED: i32 = 0x5c13;
const INVITE: i32 = 0x5c14;
const LARGE: i32 = 0x5c15;

/// As [`Ranks::all_gather`] (every rank's bytes in rank order, on every rank), but rank 0
/// waits at most `wait` for the others' bytes and the others at most twice that for rank 0
/// to send them all back (rank 0 may itself wait `wait` for the slowest): `Err` names who
/// was silent. `None`: wait as long as it takes. Rank 0 sends every rank the whole set with
/// MPI's standard send, so the set should stay small (a few kilobytes: under the
/// transport's eager limit a send completes without the receiver's help).
pub fn all_gather_within(
    ranks: &dyn Ranks,
    mine: &[u8],
    wait: Option<Duration>,
) -> Result<Vec<Vec<u8>>, Silent> {
    if ranks.size() == 1 {
        return Ok(vec![mine.to_vec()]);
    }
    if ranks.rank() == 0 {
        let mut heard = hear_from_all(ranks, CONTRIBUTE, wait)?;
        heard[0] = Some(mine.to_vec());
        let all: Vec<Vec<u8>> = heard.into_iter().map(Option::unwrap_or_default).collect();
        let packed = pack(&all);
        for r in 1..ranks.size() {
            ranks.send(r, EVERYONE, &packed);
        }
        return Ok(all);
    }
    ranks.send(0, CONTRIBUTE, mine);
    let packed = hear_from_rank_zero(ranks, EVERYONE, wait)?;
    // Rank 0 packed it; a set that does not unpack is rank 0 not answering as it should.
    unpack(&packed, ranks.size()).ok_or(Silent {
        ranks: vec![0],
        waited: 2 * wait.unwrap_or_default(),
    })
}

/// Rank 0's `bytes` on every rank (what rank 0 decided, for the others to act on): rank 0
/// sends them and goes on without waiting; the others wait at most twice `wait` (rank 0 may
/// itself have waited `wait` for the slowest rank just before). `Err` names rank 0 where it
/// was silent. `bytes` is ignored on the other ranks.
pub fn broadcast_within(
    ranks: &dyn Ranks,
    bytes: &[u8],
    wait: Option<Duration>,
) -> Result<Vec<u8>, Silent> {
    if ranks.rank() == 0 {
        for r in 1..ranks.size() {
            ranks.send(r, DECIDED, bytes);
        }
        return Ok(bytes.to_vec());
    }
    hear_from_rank_zero(ranks, DECIDED, wait)
}

/// Every rank's bytes in rank order on rank 0 (`None` on the others), for bytes too large
/// to send before the receiver is there: MPI's send of a message past the transport's
/// eager limit waits for the receiver to take it, without end where it stopped. So each
/// rank sends only once rank 0 has invited it (rank 0 then already waits for the bytes);
/// rank 0 waits at most `wait` for the bytes, the others at most twice that for the
/// invitation. `Err` names who was silent.
pub fn gather_large_within(
    ranks: &dyn Ranks,
    mine: &[u8],
    wait: Option<Duration>,
) -> Result<Option<Vec<Vec<u8>>>, Silent> {
    if ranks.size() == 1 {
        return Ok(Some(vec![mine.to_vec()]));
    }
    if ranks.rank() == 0 {
        for r in 1..ranks.size() {
            ranks.send(r, INVITE, &[]);
        }
        let mut heard = hear_from_all(ranks, LARGE, wait)?;
        heard[0] = Some(mine.to_vec());
        return Ok(Some(
            heard.into_iter().map(Option::unwrap_or_default).collect(),
        ));
    }
    hear_from_rank_zero(ranks, INVITE, wait)?;
    ranks.send(0, LARGE, mine);
    Ok(None)
}

/// Each part as its length (8 bytes, little-endian) then its bytes.
fn pack(parts: &[Vec<u8>]) -> Vec<u8> {
    let total: usize = parts.iter().map(|p| 8 + p.len()).sum();
    let mut out = Vec::with_capacity(total);
    for p in parts {
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

/// The `count` parts [`pack`] packed, or `None` where `bytes` is not such a packing.
fn unpack(mut bytes: &[u8], count: usize) -> Option<Vec<Vec<u8>>> {
    let mut parts = Vec::with_capacity(count);
    for _ in 0..count {
        let (len, rest) = bytes.split_first_chunk::<8>()?;
        let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
        if rest.len() < len {
            return None;
        }
        parts.push(rest[..len].to_vec());
        bytes = &rest[len..];
    }
    bytes.is_empty().then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::threads;
    use std::time::Instant;

    const WAIT: Option<Duration> = Some(Duration::from_millis(300));

    #[test]
    fn every_rank_gets_every_ranks_bytes_in_order_round_after_round() {
        let out = threads::run_on(3, 3, |r| {
            (0..4u8)
                .map(|round| {
                    let mine = vec![round; r.rank() + 1];
                    all_gather_within(r, &mine, WAIT).unwrap()
                })
                .collect::<Vec<_>>()
        });
        for rounds in out {
            for (round, all) in rounds.iter().enumerate() {
                let round = round as u8;
                assert_eq!(all, &vec![vec![round], vec![round; 2], vec![round; 3]]);
            }
        }
    }

    #[test]
    fn a_rank_that_never_comes_is_named_by_rank_zero_and_rank_zero_by_the_others() {
        let started = Instant::now();
        let out = threads::run_on(3, 3, |r| match r.rank() {
            // Rank 2 stopped answering.
            2 => None,
            _ => Some(all_gather_within(r, b"x", WAIT)),
        });
        let zero = out[0].clone().unwrap().unwrap_err();
        assert_eq!(zero.to_string(), "rank 2 did not answer within 0.3 s");
        // Rank 1 hears nothing back from rank 0, which gave up.
        let one = out[1].clone().unwrap().unwrap_err();
        assert_eq!(one.to_string(), "rank 0 did not answer within 0.6 s");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn large_bytes_reach_rank_zero_in_order_and_a_silent_rank_is_named() {
        let out = threads::run_on(3, 3, |r| {
            gather_large_within(r, &vec![r.rank() as u8; 10_000 * r.rank()], WAIT).unwrap()
        });
        let sizes: Vec<usize> = out[0].as_ref().unwrap().iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![0, 10_000, 20_000]);
        assert!(out[1].is_none() && out[2].is_none());
        let out = threads::run_on(3, 3, |r| {
            (r.rank() != 1).then(|| gather_large_within(r, b"x", WAIT))
        });
        let err = out[0].clone().unwrap().unwrap_err();
        assert_eq!(err.to_string(), "rank 1 did not answer within 0.3 s");
        // Rank 2 was invited and sent: it is not held.
        assert_eq!(out[2].clone().unwrap(), Ok(None));
        // Rank 0 never invites: the others name it.
        let out = threads::run_on(2, 2, |r| {
            (r.rank() == 1).then(|| gather_large_within(r, b"x", WAIT))
        });
        let err = out[1].clone().unwrap().unwrap_err();
        assert_eq!(err.to_string(), "rank 0 did not answer within 0.6 s");
    }

    #[test]
    fn packing_round_trips_and_refuses_what_it_did_not_pack() {
        let parts = vec![vec![], vec![1, 2, 3], vec![9; 20]];
        let packed = pack(&parts);
        assert_eq!(unpack(&packed, 3), Some(parts));
        assert_eq!(unpack(&packed, 2), None);
        assert_eq!(unpack(&packed[..packed.len() - 1], 3), None);
        assert_eq!(unpack(&[0xff; 8], 1), None);
    }

    #[test]
    fn rank_zeros_word_reaches_every_rank_and_its_silence_is_named() {
        let out = threads::run_on(3, 3, |r| broadcast_within(r, &[r.rank() as u8 + 7], WAIT));
        assert!(out.iter().all(|o| o == &Ok(vec![7])), "{out:?}");
        let out = threads::run_on(2, 2, |r| {
            (r.rank() == 1).then(|| broadcast_within(r, b"", WAIT))
        });
        let err = out[1].clone().unwrap().unwrap_err();
        assert_eq!(err.to_string(), "rank 0 did not answer within 0.6 s");
    }

    #[test]
    fn one_rank_alone_never_waits() {
        assert_eq!(
            all_gather_within(&crate::cluster::Solo, b"a", WAIT),
            Ok(vec![b"a".to_vec()])
        );
        assert_eq!(
            broadcast_within(&crate::cluster::Solo, b"a", WAIT),
            Ok(b"a".to_vec())
        );
    }
}
