//! Tree topology: which bricks go under which lower and upper nodes, in NanoVDB order.

use super::*;

/// A node and the contiguous run of its children in the next level's array.
#[derive(Clone, Copy, Debug)]
pub(super) struct Span {
    pub(super) origin: Coord,
    pub(super) first: u32,
    pub(super) count: u32,
}

/// The tree's shape: bricks in leaf order, grouped into lower and upper nodes.
pub(super) struct Plan {
    /// Brick indices in NanoVDB's breadth-first leaf order.
    pub(super) order: Vec<u32>,
    /// Lower nodes in order, each with its run of leaves.
    pub(super) lowers: Vec<Span>,
    /// Upper nodes in root-tile order, each with its run of lower nodes.
    pub(super) uppers: Vec<Span>,
}

/// Maps a coordinate's upper-node part to 20 bits that sort like the signed coordinate.
pub(super) fn upper_bits(c: i32) -> u128 {
    u128::from((c as u32 ^ 0x8000_0000) >> 12)
}

/// Position of a child with origin `origin` in the table of its parent `node`.
pub(super) fn child_index(origin: Coord, node: &NodeLayout) -> usize {
    let child_total = if node.log2dim == 5 {
        layout::LOWER_TOTAL
    } else {
        layout::LEAF_TOTAL
    };
    let mask = (1i32 << (child_total + node.log2dim)) - 1;
    let d = node.log2dim;
    let part = |c: i32| ((c & mask) >> child_total) as usize;
    part(origin[0]) << (2 * d) | part(origin[1]) << d | part(origin[2])
}

impl Plan {
    /// The plan of `n` leaves, leaf `i` at `origin_of(i)`; errors name leaf `i` as "brick i".
    pub(super) fn of_origins(
        n: usize,
        origin_of: impl Fn(usize) -> Coord,
    ) -> Result<Plan, FormatError> {
        if n > u32::MAX as usize {
            return Err(invalid("sparse volume", 0, "more than 2^32 bricks"));
        }
        // Sort key: upper node (60 bits, signed order) | lower index (15) | leaf index (12) |
        // brick index (32). Sorting by it yields NanoVDB's breadth-first order at every level.
        let mut keys = Vec::with_capacity(n);
        for i in 0..n {
            let [x, y, z] = origin_of(i);
            if (x | y | z) & 7 != 0 {
                return Err(invalid(
                    format!("brick {i}"),
                    i as u64,
                    format!("origin {:?} is not a multiple of 8", origin_of(i)),
                ));
            }
            let lower = ((x & 4095) >> 7) << 10 | ((y & 4095) >> 7) << 5 | ((z & 4095) >> 7);
            let leaf = ((x & 127) >> 3) << 8 | ((y & 127) >> 3) << 4 | ((z & 127) >> 3);
            let upper = upper_bits(x) << 40 | upper_bits(y) << 20 | upper_bits(z);
            keys.push(upper << 59 | ((lower << 12 | leaf) as u128) << 32 | i as u128);
        }
        if n > 1 << 14 {
            keys.par_sort_unstable();
        } else {
            keys.sort_unstable();
        }

        let mut order = Vec::with_capacity(n);
        let mut lowers: Vec<Span> = Vec::new();
        let mut uppers: Vec<Span> = Vec::new();
        let mut prev: Option<u128> = None;
        for (pos, &k) in keys.iter().enumerate() {
            let idx = k as u32;
            let origin = origin_of(idx as usize);
            let node = k >> 32;
            if prev == Some(node) {
                let first = order[pos - 1];
                return Err(invalid(
                    format!("brick {idx}"),
                    u64::from(idx),
                    format!("origin {origin:?} is also the origin of brick {first}"),
                ));
            }
            let new_upper = prev.is_none_or(|p| p >> 27 != node >> 27);
            let new_lower = new_upper || prev.is_none_or(|p| p >> 12 != node >> 12);
            if new_upper {
                uppers.push(Span {
                    origin: origin.map(|c| c & !4095),
                    first: lowers.len() as u32,
                    count: 0,
                });
            }
            if new_lower {
                lowers.push(Span {
                    origin: origin.map(|c| c & !127),
                    first: pos as u32,
                    count: 0,
                });
                uppers.last_mut().unwrap().count += 1;
            }
            lowers.last_mut().unwrap().count += 1;
            order.push(idx);
            prev = Some(node);
        }
        Ok(Plan {
            order,
            lowers,
            uppers,
        })
    }
}
