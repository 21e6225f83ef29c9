//! Sort-last compositing across ranks: each rank holds a premultiplied RGBA image of its
//! part of the domain, and the parts are combined front to back ("over") onto rank 0 by
//! binary swap, as IceT does: in round `r` each rank pairs with the one `2^r` places away
//! in visibility order, keeps half of the pixels it still holds and composites the
//! partner's half of them, so every rank composites `1/2 + 1/4 + ...` of an image whatever
//! the rank count, and rank 0 gathers the finished pieces. A rank count that is not a
//! power of two first folds the surplus ranks onto their neighbours in visibility order.
//!
//! Pairs are made in *visibility order*, not in rank order, so every image a rank holds
//! is the composite of a run of consecutive parts front to back ("over" is associative but
//! not commutative); [`visibility_order`] finds that order for parts from a k-d split.
//!
//! Every wait is bounded: a partner that died or stopped answering is named
//! ([`Silent`]) and the caller ends the run.

use std::time::{Duration, Instant};

use super::{Ranks, Silent, gather_within};

/// Tags of the messages, one per step, so a late message of one step is never taken for
/// another's (0x5dxx: no other step of the crate uses them).
const FOLD: i32 = 0x5d00;
const SWAP: i32 = 0x5d01; // + round, rounds < 32
const GATHER: i32 = 0x5d41;
const REDUCED: i32 = 0x5d42;

/// Floats per pixel: premultiplied red, green, blue, alpha.
const CHANNELS: usize = 4;

/// Composites `back` behind `front` in place: premultiplied RGBA, 4 floats a pixel.
pub type Over = fn(front: &mut [f32], back: &[f32]);

/// Why a frame could not be composited.
#[derive(Debug, thiserror::Error)]
pub enum CompositeError {
    /// A rank did not answer in time: the caller should end the run ([`Ranks::abort`]).
    #[error("{0}: a rank died or stopped answering")]
    Silent(#[from] Silent),
    /// A message did not hold what this step expects (a different frame, image size or
    /// pixel range): the ranks disagree about the run.
    #[error("compositing frame {frame}: rank {from} sent {what}")]
    Malformed {
        /// The frame being composited.
        frame: u32,
        /// Who sent it.
        from: usize,
        /// What was wrong with it.
        what: String,
    },
    /// The arguments do not describe a run: `order` is not a permutation of the ranks, or
    /// the image is not whole pixels.
    #[error("compositing frame {frame}: {what}")]
    Arguments {
        /// The frame being composited.
        frame: u32,
        /// What is wrong.
        what: String,
    },
}

/// Why no visibility order exists for a set of boxes.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the parts' boxes are not a k-d split (no plane separates boxes {boxes:?} into two groups)"
)]
pub struct NotSplit {
    /// The boxes no axis-aligned plane separates.
    pub boxes: Vec<usize>,
}

/// The parts (axis-aligned boxes `[min, max]`, disjoint, from a k-d split of the domain)
/// in front-to-back order as seen from `eye`: along every ray from `eye`, a part comes
/// before every part it precedes here. Found as a BSP traversal: a plane that separates
/// the boxes into two groups is found, the group on the eye's side comes first, and each
/// group is ordered the same way.
pub fn visibility_order(eye: [f64; 3], boxes: &[[[f64; 3]; 2]]) -> Result<Vec<usize>, NotSplit> {
    let mut order = Vec::with_capacity(boxes.len());
    order_into(eye, boxes, (0..boxes.len()).collect(), &mut order)?;
    Ok(order)
}

fn order_into(
    eye: [f64; 3],
    boxes: &[[[f64; 3]; 2]],
    set: Vec<usize>,
    out: &mut Vec<usize>,
) -> Result<(), NotSplit> {
    if set.len() <= 1 {
        out.extend(set);
        return Ok(());
    }
    for axis in 0..3 {
        for &candidate in &set {
            let plane = boxes[candidate][1][axis];
            let (low, high): (Vec<usize>, Vec<usize>) =
                set.iter().partition(|&&b| boxes[b][1][axis] <= plane);
            let separated = !high.is_empty() && high.iter().all(|&b| boxes[b][0][axis] >= plane);
            if separated {
                let (near, far) = if eye[axis] < plane {
                    (low, high)
                } else {
                    (high, low)
                };
                order_into(eye, boxes, near, out)?;
                return order_into(eye, boxes, far, out);
            }
        }
    }
    Err(NotSplit { boxes: set })
}

/// Composites every rank's `image` (premultiplied RGBA, `4 × pixels` floats, the same
/// size on every rank) front to back in `order` (ranks, nearest first: a permutation of
/// `0..size`) with `over`: the whole composite on rank 0, `None` on the others. Each wait
/// for another rank gives up after `wait` (`None`: as long as it takes).
pub fn composite_within(
    ranks: &dyn Ranks,
    order: &[usize],
    frame: u32,
    mut image: Vec<f32>,
    over: Over,
    wait: Option<Duration>,
) -> Result<Option<Vec<f32>>, CompositeError> {
    let plan = Plan::new(ranks.size(), order, ranks.rank(), frame)?;
    if !image.len().is_multiple_of(CHANNELS) {
        return Err(CompositeError::Arguments {
            frame,
            what: format!(
                "an image of {} floats is not whole RGBA pixels",
                image.len()
            ),
        });
    }
    let pixels = image.len() / CHANNELS;
    let step = Step {
        ranks,
        frame,
        pixels,
        wait,
    };
    let held = plan.fold(&step, &mut image, over)?;
    let held = match held {
        Some(v) => Some(plan.swap(&step, v, &mut image, over)?),
        None => None,
    };
    plan.gather(&step, held, image)
}

/// One frame's compositing as this rank sees it.
struct Step<'r> {
    ranks: &'r dyn Ranks,
    frame: u32,
    pixels: usize,
    wait: Option<Duration>,
}

impl Step<'_> {
    fn deadline(&self) -> Option<Instant> {
        self.wait.map(|w| Instant::now() + w)
    }

    /// Sends pixels `range` of `image` to `to` under `tag`.
    fn send(
        &self,
        to: usize,
        tag: i32,
        image: &[f32],
        range: std::ops::Range<usize>,
    ) -> Result<(), Silent> {
        let mut bytes = Vec::with_capacity(20 + range.len() * CHANNELS * 4);
        bytes.extend_from_slice(&self.frame.to_le_bytes());
        bytes.extend_from_slice(&(range.start as u64).to_le_bytes());
        bytes.extend_from_slice(&(range.len() as u64).to_le_bytes());
        extend_floats(
            &mut bytes,
            &image[range.start * CHANNELS..range.end * CHANNELS],
        );
        if self.ranks.send_until(to, tag, &bytes, self.deadline()) {
            Ok(())
        } else {
            Err(Silent {
                ranks: vec![to],
                waited: self.wait.unwrap_or_default(),
            })
        }
    }

    /// Receives pixels `range` from `from` under `tag`.
    fn receive(
        &self,
        from: usize,
        tag: i32,
        range: std::ops::Range<usize>,
    ) -> Result<Vec<f32>, CompositeError> {
        let (sender, bytes) = self.receive_any(tag, &[from])?;
        self.piece(sender, &bytes, range)
    }

    /// The next message under `tag`, which must come from one of `expected`.
    fn receive_any(
        &self,
        tag: i32,
        expected: &[usize],
    ) -> Result<(usize, Vec<u8>), CompositeError> {
        let Some((sender, bytes)) = self.ranks.receive_until(tag, self.deadline()) else {
            return Err(Silent {
                ranks: expected.to_vec(),
                waited: self.wait.unwrap_or_default(),
            }
            .into());
        };
        if !expected.contains(&sender) {
            return Err(CompositeError::Malformed {
                frame: self.frame,
                from: sender,
                what: format!("a piece expected from rank(s) {expected:?}"),
            });
        }
        Ok((sender, bytes))
    }

    /// The pixels of a piece `sender` sent, which must be pixels `range` of this frame.
    fn piece(
        &self,
        sender: usize,
        bytes: &[u8],
        range: std::ops::Range<usize>,
    ) -> Result<Vec<f32>, CompositeError> {
        let malformed = |what: String| CompositeError::Malformed {
            frame: self.frame,
            from: sender,
            what,
        };
        let word = |at: usize, len: usize| bytes.get(at..at + len);
        let (Some(f), Some(start), Some(count)) = (word(0, 4), word(4, 8), word(12, 8)) else {
            return Err(malformed(format!("a {}-byte piece", bytes.len())));
        };
        let f = u32::from_le_bytes(f.try_into().expect("4 bytes"));
        let start = u64::from_le_bytes(start.try_into().expect("8 bytes"));
        let count = u64::from_le_bytes(count.try_into().expect("8 bytes"));
        let floats = &bytes[20..];
        if f != self.frame
            || start != range.start as u64
            || count != range.len() as u64
            || floats.len() != range.len() * CHANNELS * 4
        {
            return Err(malformed(format!(
                "frame {f} pixels {start}+{count} ({} bytes) where frame {} pixels {}+{} \
                 were due",
                floats.len(),
                self.frame,
                range.start,
                range.len()
            )));
        }
        Ok(floats_of(floats))
    }
}

/// Appends `floats` as little-endian bytes: one copy where the machine is little-endian.
fn extend_floats(bytes: &mut Vec<u8>, floats: &[f32]) {
    if cfg!(target_endian = "little") {
        bytes.extend_from_slice(bytemuck::cast_slice(floats));
    } else {
        floats
            .iter()
            .for_each(|v| bytes.extend_from_slice(&v.to_le_bytes()));
    }
}

/// Little-endian bytes (a multiple of 4, any alignment) back into floats.
fn floats_of(bytes: &[u8]) -> Vec<f32> {
    if cfg!(target_endian = "little") {
        bytemuck::pod_collect_to_vec(bytes)
    } else {
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect()
    }
}

/// Composites `theirs` (pixels `range`) with this rank's pixels there, in place: this
/// rank's in front where `mine_in_front`.
fn merge(
    image: &mut [f32],
    range: std::ops::Range<usize>,
    theirs: &[f32],
    mine_in_front: bool,
    over: Over,
) {
    let mine = &mut image[range.start * CHANNELS..range.end * CHANNELS];
    if mine_in_front {
        over(mine, theirs);
    } else {
        let mut front = theirs.to_vec();
        over(&mut front, mine);
        mine.copy_from_slice(&front);
    }
}

/// Who pairs with whom, from the visibility order.
struct Plan<'o> {
    /// Ranks front to back.
    order: &'o [usize],
    /// This rank's place in `order`.
    place: usize,
    /// The largest power of two not above the rank count: the ranks left after folding.
    active: usize,
    /// Ranks folded onto a neighbour first.
    surplus: usize,
}

impl<'o> Plan<'o> {
    fn new(
        size: usize,
        order: &'o [usize],
        rank: usize,
        frame: u32,
    ) -> Result<Self, CompositeError> {
        let mut seen = vec![false; size];
        for &r in order {
            if r >= size || std::mem::replace(&mut seen[r], true) {
                return Err(CompositeError::Arguments {
                    frame,
                    what: format!("the order {order:?} is not a permutation of {size} ranks"),
                });
            }
        }
        if order.len() != size {
            return Err(CompositeError::Arguments {
                frame,
                what: format!("the order {order:?} is not a permutation of {size} ranks"),
            });
        }
        let active = 1usize << (usize::BITS - 1 - size.leading_zeros());
        let place = order
            .iter()
            .position(|&r| r == rank)
            .expect("checked above");
        Ok(Plan {
            order,
            place,
            active,
            surplus: size - active,
        })
    }

    /// The rank that plays place `v` among the ranks left after folding.
    fn active_rank(&self, v: usize) -> usize {
        if v < self.surplus {
            self.order[2 * v]
        } else {
            self.order[v + self.surplus]
        }
    }

    /// The pixels active place `v` holds at the end of the swap.
    fn final_range(&self, v: usize, pixels: usize) -> std::ops::Range<usize> {
        let (mut lo, mut hi) = (0, pixels);
        let mut bit = 1;
        while bit < self.active {
            let mid = lo + (hi - lo) / 2;
            if v & bit == 0 {
                hi = mid
            } else {
                lo = mid
            }
            bit <<= 1;
        }
        lo..hi
    }

    /// Folds the surplus ranks onto their front neighbours: this rank's place after the
    /// fold, or `None` where it handed its image on.
    fn fold(
        &self,
        step: &Step<'_>,
        image: &mut [f32],
        over: Over,
    ) -> Result<Option<usize>, CompositeError> {
        let p = self.place;
        if p >= 2 * self.surplus {
            return Ok(Some(p - self.surplus));
        }
        let all = 0..step.pixels;
        if !p.is_multiple_of(2) {
            step.send(self.order[p - 1], FOLD, image, all)?;
            return Ok(None);
        }
        let theirs = step.receive(self.order[p + 1], FOLD, all.clone())?;
        merge(image, all, &theirs, true, over);
        Ok(Some(p / 2))
    }

    /// Binary swap among the active places: the pixels this rank holds at the end.
    fn swap(
        &self,
        step: &Step<'_>,
        v: usize,
        image: &mut [f32],
        over: Over,
    ) -> Result<std::ops::Range<usize>, CompositeError> {
        let (mut lo, mut hi) = (0, step.pixels);
        let mut round = 0;
        while (1usize << round) < self.active {
            let partner_place = v ^ (1 << round);
            let partner = self.active_rank(partner_place);
            let mid = lo + (hi - lo) / 2;
            let front = v < partner_place;
            let (keep, give) = if front {
                (lo..mid, mid..hi)
            } else {
                (mid..hi, lo..mid)
            };
            let tag = SWAP + round;
            // The front one sends first and the back one receives first: a large blocking
            // send waits for its receiver, so two sends first would wait for each other.
            let theirs = if front {
                step.send(partner, tag, image, give)?;
                step.receive(partner, tag, keep.clone())?
            } else {
                let theirs = step.receive(partner, tag, keep.clone())?;
                step.send(partner, tag, image, give)?;
                theirs
            };
            merge(image, keep.clone(), &theirs, front, over);
            (lo, hi) = (keep.start, keep.end);
            round += 1;
        }
        Ok(lo..hi)
    }

    /// Every active rank's finished pixels to rank 0, which assembles the whole image.
    fn gather(
        &self,
        step: &Step<'_>,
        held: Option<std::ops::Range<usize>>,
        image: Vec<f32>,
    ) -> Result<Option<Vec<f32>>, CompositeError> {
        let me = step.ranks.rank();
        if me != 0 {
            if let Some(range) = held {
                step.send(0, GATHER, &image, range)?;
            }
            return Ok(None);
        }
        let mut whole = vec![0.0; step.pixels * CHANNELS];
        // The pieces come in whatever order the ranks finish: each is placed by its sender.
        let mut due: Vec<(usize, std::ops::Range<usize>)> = Vec::with_capacity(self.active);
        for v in 0..self.active {
            let range = self.final_range(v, step.pixels);
            let from = self.active_rank(v);
            if from == me {
                let floats = range.start * CHANNELS..range.end * CHANNELS;
                whole[floats.clone()].copy_from_slice(&image[floats]);
            } else {
                due.push((from, range));
            }
        }
        while !due.is_empty() {
            let senders: Vec<usize> = due.iter().map(|d| d.0).collect();
            let (sender, bytes) = step.receive_any(GATHER, &senders)?;
            let at = senders
                .iter()
                .position(|&s| s == sender)
                .expect("expected sender");
            let (_, range) = due.swap_remove(at);
            let piece = step.piece(sender, &bytes, range.clone())?;
            whole[range.start * CHANNELS..range.end * CHANNELS].copy_from_slice(&piece);
        }
        Ok(Some(whole))
    }
}

/// Every rank's `mine` combined with `combine` in rank order (`combine(acc, next)`), on
/// every rank: what the ranks need alike, such as the extinction grid sun shadows are
/// made from, where each rank holds its part's. Rank 0 combines; every wait is bounded.
pub fn all_reduce_within(
    ranks: &dyn Ranks,
    mine: &[f32],
    combine: fn(&mut [f32], &[f32]),
    wait: Option<Duration>,
) -> Result<Vec<f32>, CompositeError> {
    let mut bytes = Vec::with_capacity(mine.len() * 4);
    extend_floats(&mut bytes, mine);
    let floats = floats_of;
    let gathered = gather_within(ranks, &bytes, wait)?;
    if let Some(all) = gathered {
        let mut acc = mine.to_vec();
        for (r, b) in all.iter().enumerate().skip(1) {
            if b.len() != bytes.len() {
                return Err(CompositeError::Malformed {
                    frame: 0,
                    from: r,
                    what: format!(
                        "{} bytes to combine where {} were due",
                        b.len(),
                        bytes.len()
                    ),
                });
            }
            combine(&mut acc, &floats(b));
        }
        let mut out = Vec::with_capacity(acc.len() * 4);
        extend_floats(&mut out, &acc);
        let deadline = wait.map(|w| Instant::now() + w);
        for r in 1..ranks.size() {
            if !ranks.send_until(r, REDUCED, &out, deadline) {
                return Err(Silent {
                    ranks: vec![r],
                    waited: wait.unwrap_or_default(),
                }
                .into());
            }
        }
        return Ok(acc);
    }
    let deadline = wait.map(|w| Instant::now() + 2 * w);
    match ranks.receive_until(REDUCED, deadline) {
        Some((0, b)) if b.len() == bytes.len() => Ok(floats(&b)),
        Some((from, b)) => Err(CompositeError::Malformed {
            frame: 0,
            from,
            what: format!(
                "a combined grid of {} bytes where {} were due",
                b.len(),
                bytes.len()
            ),
        }),
        None => Err(Silent {
            ranks: vec![0],
            waited: 2 * wait.unwrap_or_default(),
        }
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::threads;

    const WAIT: Option<Duration> = Some(Duration::from_secs(5));

    /// Premultiplied front-to-back "over", as the renderer's.
    fn over(front: &mut [f32], back: &[f32]) {
        for (f, b) in front.chunks_exact_mut(4).zip(back.chunks_exact(4)) {
            let t = 1.0 - f[3];
            for c in 0..4 {
                f[c] += t * b[c];
            }
        }
    }

    /// Part `k`'s image: a colour and opacity that differ per part and per pixel, so any
    /// pair composited in the wrong order shows.
    fn part_image(k: usize, pixels: usize) -> Vec<f32> {
        (0..pixels)
            .flat_map(|p| {
                let a = 0.1 + 0.8 * (((p * 7 + k * 13) % 11) as f32 / 10.0);
                let c = (k as f32 + 1.0) / 8.0;
                [c * a, (1.0 - c) * a, ((p % 5) as f32 / 4.0) * a, a]
            })
            .collect()
    }

    /// The parts composited one after another in `order`, on one thread.
    fn serial(order: &[usize], pixels: usize) -> Vec<f32> {
        let mut acc = part_image(order[0], pixels);
        for &k in &order[1..] {
            over(&mut acc, &part_image(k, pixels));
        }
        acc
    }

    fn run(size: usize, order: &[usize], pixels: usize) -> Vec<Option<Vec<f32>>> {
        threads::run_on(size, size, |r| {
            composite_within(r, order, 7, part_image(r.rank(), pixels), over, WAIT).unwrap()
        })
    }

    #[test]
    fn binary_swap_equals_serial_compositing_for_every_rank_count() {
        for size in 1..=7 {
            // A visibility order other than rank order, to show pairs follow it.
            let order: Vec<usize> = (0..size).map(|i| (i * 3 + 1) % size).collect();
            let order = if size % 3 == 0 {
                (0..size).rev().collect()
            } else {
                order
            };
            for pixels in [1, 5, 64, 999] {
                let out = run(size, &order, pixels);
                let whole = out[0].as_ref().expect("rank 0 has the composite");
                let want = serial(&order, pixels);
                for (i, (a, b)) in whole.iter().zip(&want).enumerate() {
                    assert!(
                        (a - b).abs() < 1e-5,
                        "{size} ranks, {pixels} px: float {i}: {a} vs {b}"
                    );
                }
                assert!(out[1..].iter().all(Option::is_none));
            }
        }
    }

    #[test]
    fn a_wrong_order_gives_a_different_picture() {
        // The test above could not tell orders apart if the images commuted.
        let pixels = 50;
        assert_ne!(serial(&[0, 1, 2], pixels), serial(&[2, 1, 0], pixels));
    }

    #[test]
    fn a_silent_partner_is_named() {
        let out = threads::run_on(2, 2, |r| {
            (r.rank() == 0).then(|| {
                composite_within(
                    r,
                    &[0, 1],
                    3,
                    part_image(0, 8),
                    over,
                    Some(Duration::from_millis(200)),
                )
            })
        });
        let err = out[0].as_ref().unwrap().as_ref().unwrap_err();
        assert!(
            matches!(err, CompositeError::Silent(s) if s.ranks == vec![1]),
            "{err}"
        );
    }

    #[test]
    fn a_piece_of_another_frame_is_refused_naming_its_sender() {
        // Rank 1 composites frame 4 while rank 0 composites frame 3: the ranks disagree.
        // Rank 0, in front, sends first; rank 1 refuses its piece (and, in a run, ends it).
        let wait = Some(Duration::from_millis(300));
        let out = threads::run_on(2, 2, |r| {
            let frame = 3 + r.rank() as u32;
            composite_within(r, &[0, 1], frame, part_image(r.rank(), 8), over, wait)
        });
        let err = out[1].as_ref().unwrap_err();
        let refused = matches!(
            err,
            CompositeError::Malformed {
                from: 0,
                frame: 4,
                ..
            }
        );
        assert!(refused, "{err}");
        assert!(err.to_string().contains("frame 3 pixels"), "{err}");
        // Rank 0 then hears nothing back and names rank 1 instead of waiting for ever.
        assert!(matches!(out[0], Err(CompositeError::Silent(_))));
    }

    #[test]
    fn all_reduce_refuses_a_rank_whose_cells_are_another_length() {
        fn add(acc: &mut [f32], next: &[f32]) {
            acc.iter_mut().zip(next).for_each(|(a, b)| *a += b);
        }
        let out = threads::run_on(2, 2, |r| {
            let mine = vec![1.0; 2 + r.rank()];
            all_reduce_within(r, &mine, add, Some(Duration::from_millis(500)))
        });
        let err = out[0].as_ref().unwrap_err();
        assert!(
            matches!(err, CompositeError::Malformed { from: 1, .. }),
            "{err}"
        );
    }

    #[test]
    fn an_order_that_is_not_a_permutation_is_refused() {
        let solo = crate::cluster::Solo;
        let err = composite_within(&solo, &[1], 0, vec![0.0; 4], over, WAIT).unwrap_err();
        assert!(err.to_string().contains("not a permutation"), "{err}");
    }

    #[test]
    fn all_reduce_combines_in_rank_order_on_every_rank() {
        fn max(acc: &mut [f32], next: &[f32]) {
            for (a, b) in acc.iter_mut().zip(next) {
                *a = a.max(*b);
            }
        }
        let out = threads::run_on(3, 3, |r| {
            let k = r.rank() as f32;
            all_reduce_within(r, &[k, 10.0 - k, 1.0], max, WAIT).unwrap()
        });
        assert!(out.iter().all(|v| v == &vec![2.0, 10.0, 1.0]));
    }

    fn slab(x0: f64, x1: f64) -> [[f64; 3]; 2] {
        [[x0, 0.0, 0.0], [x1, 1.0, 1.0]]
    }

    #[test]
    fn slabs_are_ordered_from_the_eye_side() {
        let boxes = [slab(0.0, 1.0), slab(1.0, 2.0), slab(2.0, 3.0)];
        assert_eq!(
            visibility_order([-5.0, 0.5, 0.5], &boxes),
            Ok(vec![0, 1, 2])
        );
        assert_eq!(visibility_order([9.0, 0.5, 0.5], &boxes), Ok(vec![2, 1, 0]));
        // From inside the middle slab: it first, then either neighbour behind it.
        let inside = visibility_order([1.5, 0.5, 0.5], &boxes).unwrap();
        assert_eq!(inside[0], 1);
    }

    #[test]
    fn a_kd_split_is_ordered_by_its_planes_and_a_non_split_is_refused() {
        // x split at 1, then each half split along y at different places.
        let boxes = [
            [[0.0, 0.0, 0.0], [1.0, 0.3, 1.0]],
            [[0.0, 0.3, 0.0], [1.0, 1.0, 1.0]],
            [[1.0, 0.0, 0.0], [2.0, 0.7, 1.0]],
            [[1.0, 0.7, 0.0], [2.0, 1.0, 1.0]],
        ];
        assert_eq!(
            visibility_order([3.0, 2.0, 0.5], &boxes),
            Ok(vec![3, 2, 1, 0])
        );
        assert_eq!(
            visibility_order([-1.0, -1.0, 0.5], &boxes),
            Ok(vec![0, 1, 2, 3])
        );
        // A pinwheel of four boxes around a centre square has no separating plane.
        let pinwheel = [
            [[0.0, 0.0, 0.0], [2.0, 1.0, 1.0]],
            [[2.0, 0.0, 0.0], [3.0, 2.0, 1.0]],
            [[1.0, 2.0, 0.0], [3.0, 3.0, 1.0]],
            [[0.0, 1.0, 0.0], [1.0, 3.0, 1.0]],
            [[1.0, 1.0, 0.0], [2.0, 2.0, 1.0]],
        ];
        assert!(visibility_order([0.5, 0.5, 0.5], &pinwheel).is_err());
    }
}
