//! Leaves encoded ahead of their tree.
//!
//! A leaf's bytes (mask, bounding box, quantization, codes, statistics) depend on its own
//! voxels only; where it goes in the grid depends on all the leaves. A producer that makes
//! bricks one at a time (the storm generator) can therefore encode each leaf right after
//! making its values, while they are in cache, into compact records ([`EncodedBlock`]); the
//! grid build ([`super::build_grid_encoded_into`]) then only orders the records and copies
//! them into place. The bytes are those [`super::build_grid_into`] writes for a volume of
//! the same bricks: the same functions encode each leaf.

use super::*;

/// One leaf of an [`EncodedBlock`]: where its bytes are and what the tree above needs.
#[derive(Clone, Copy, Debug)]
pub(super) struct EncodedLeaf {
    pub(super) origin: Coord,
    /// Byte offset of the leaf in the block.
    at: u32,
    /// Byte length of the leaf.
    len: u32,
    /// FpN: log2 of the code width (0 for the fixed-width codecs).
    pub(super) log2_bits: u8,
    stats: NodeStats,
}

/// Encoded leaves of one grid, back to back, with each leaf's origin and statistics: what a
/// [`LeafEncoder`] fills for one run of bricks.
#[derive(Clone, Debug)]
pub struct EncodedBlock {
    codec: LeafCodec,
    grid_type: GridType,
    fpn_tolerance: f32,
    leaf_size: usize,
    expected: usize,
    bytes: Vec<u8>,
    leaves: Vec<EncodedLeaf>,
    /// Leaves whose mean and deviation the encoder has yet to store.
    unfinished: usize,
}

impl EncodedBlock {
    /// An empty block for leaves of the grid `opts` describes (its grid type, and for FpN
    /// its tolerance with `background`); room for `expected` leaves is reserved at the
    /// first leaf, so blocks that stay empty allocate nothing.
    pub fn new(
        opts: &BuildOptions,
        background: f32,
        expected: usize,
    ) -> Result<EncodedBlock, FormatError> {
        let codec = LeafCodec::of(opts.grid_type)?;
        let tl = layout::layout(opts.grid_type).ok_or(FormatError::Unsupported {
            grid_type: opts.grid_type,
            detail: "the writer has no layout for this grid type",
        })?;
        let leaf_size = match codec {
            // The widest FpN leaf (16-bit codes).
            LeafCodec::Variable => (LEAF_FPN_BASE_SIZE + 64 * 16) as usize,
            _ => tl.leaf.size as usize,
        };
        Ok(EncodedBlock {
            codec,
            grid_type: opts.grid_type,
            fpn_tolerance: fpn_tolerance(opts, background),
            leaf_size,
            expected,
            bytes: Vec::new(),
            leaves: Vec::new(),
            unfinished: 0,
        })
    }

    /// [`EncodedBlock::new`] whose leaf bytes go into `buffer`'s memory (emptied first): a
    /// buffer of an earlier block ([`EncodedLeaves::into_buffers`]) whose pages are already
    /// mapped, so that filling it faults in no fresh memory. Room for `expected` leaves is
    /// still reserved at the first leaf where the buffer holds less.
    pub fn with_buffer(
        opts: &BuildOptions,
        background: f32,
        expected: usize,
        mut buffer: Vec<u8>,
    ) -> Result<EncodedBlock, FormatError> {
        let mut block = EncodedBlock::new(opts, background, expected)?;
        buffer.clear();
        block.bytes = buffer;
        Ok(block)
    }

    /// Gives back the room reserved for leaves that did not come.
    pub fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
        self.leaves.shrink_to_fit();
    }

    /// Leaves in the block.
    pub fn len(&self) -> usize {
        self.leaves.len()
    }

    /// Whether the block has no leaf.
    pub fn is_empty(&self) -> bool {
        self.leaves.is_empty()
    }
}

/// All the encoded leaves of one grid, in any order (the build sorts them).
#[derive(Clone, Debug)]
pub struct EncodedLeaves {
    grid_type: GridType,
    background: f32,
    blocks: Vec<EncodedBlock>,
}

impl EncodedLeaves {
    /// The leaves of `blocks` (all of one grid type, each finished by its encoder), with
    /// `background` outside them. An empty list makes an empty grid of `grid_type`.
    pub fn new(
        grid_type: GridType,
        background: f32,
        blocks: Vec<EncodedBlock>,
    ) -> Result<EncodedLeaves, FormatError> {
        for b in &blocks {
            if b.grid_type != grid_type {
                return Err(invalid(
                    "encoded leaves",
                    0,
                    format!("a block of {} leaves among {grid_type}", b.grid_type),
                ));
            }
            if b.unfinished != 0 {
                return Err(invalid(
                    "encoded leaves",
                    0,
                    "a block whose encoder was not flushed (statistics missing)",
                ));
            }
        }
        Ok(EncodedLeaves {
            grid_type,
            background,
            blocks,
        })
    }

    /// The blocks' byte buffers, for [`EncodedBlock::with_buffer`] to fill again.
    pub fn into_buffers(self) -> impl Iterator<Item = Vec<u8>> {
        self.blocks.into_iter().map(|b| b.bytes)
    }

    /// The grid type the leaves are encoded for.
    pub fn grid_type(&self) -> GridType {
        self.grid_type
    }

    /// The value outside every leaf.
    pub fn background(&self) -> f32 {
        self.background
    }

    /// Number of leaves.
    pub fn len(&self) -> usize {
        self.blocks.iter().map(|b| b.leaves.len()).sum()
    }

    /// Whether there is no leaf.
    pub fn is_empty(&self) -> bool {
        self.blocks.iter().all(|b| b.leaves.is_empty())
    }

    /// (block, leaf) of every leaf, in block order.
    pub(super) fn index(&self) -> Vec<(u32, u32)> {
        let mut index = Vec::with_capacity(self.len());
        for (b, block) in self.blocks.iter().enumerate() {
            index.extend((0..block.leaves.len() as u32).map(|l| (b as u32, l)));
        }
        index
    }

    pub(super) fn leaf(&self, (b, l): (u32, u32)) -> &EncodedLeaf {
        &self.blocks[b as usize].leaves[l as usize]
    }

    /// A leaf's bytes and statistics.
    pub(super) fn leaf_bytes(&self, (b, l): (u32, u32)) -> (&[u8], NodeStats) {
        let block = &self.blocks[b as usize];
        let leaf = &block.leaves[l as usize];
        (
            &block.bytes[leaf.at as usize..][..leaf.len as usize],
            leaf.stats,
        )
    }
}

/// Encodes leaves into [`EncodedBlock`]s, several at a time: a leaf's bytes are written at
/// once, its mean and deviation when [`LANES`] leaves (of any blocks) are waiting, whose
/// Welford chains then run side by side (see `welford_lanes`), or at [`LeafEncoder::flush`].
pub struct LeafEncoder {
    pending: Box<[Pending; LANES]>,
    /// (block, leaf in the block) of each pending leaf.
    targets: [(usize, usize); LANES],
    count: usize,
}

impl Default for LeafEncoder {
    fn default() -> Self {
        LeafEncoder::new()
    }
}

impl LeafEncoder {
    /// An encoder with nothing pending.
    pub fn new() -> LeafEncoder {
        LeafEncoder {
            pending: Box::new(std::array::from_fn(|_| Pending {
                vals: [0.0; LEAF_VOXELS],
                n: 0,
                min: 0.0,
                max: 0.0,
                codec: None,
                bbox: ([0; 3], [0; 3]),
            })),
            targets: [(0, 0); LANES],
            count: 0,
        }
    }

    /// Encodes the leaf at `origin` with `values` (NanoVDB leaf order, inactive voxels as
    /// they are to be stored) and `active` into `blocks[which]`. Errors: a non-finite value
    /// in a quantized grid, naming the leaf's origin. Call [`LeafEncoder::flush`] before the
    /// blocks are used.
    pub fn push(
        &mut self,
        blocks: &mut [EncodedBlock],
        which: usize,
        origin: Coord,
        values: &[f32; LEAF_VOXELS],
        active: &[u64; 8],
    ) -> Result<(), FormatError> {
        let view = LeafView {
            origin,
            values,
            active,
        };
        let block = &mut blocks[which];
        let id = (u32::MAX, block.leaves.len());
        let quant = match block.codec {
            LeafCodec::Variable => Some(
                choose_fpn(view, block.fpn_tolerance, id.0, id.1)
                    .map_err(|e| at_origin(e, origin))?,
            ),
            _ => None,
        };
        let len = match quant {
            Some(q) => (LEAF_FPN_BASE_SIZE + 64 * (1u32 << q.log2_bits)) as usize,
            None => block.leaf_size,
        };
        if block.leaves.capacity() == 0 {
            // A reused buffer may hold the room already (`reserve` then does nothing).
            block.bytes.reserve(block.expected.max(1) * block.leaf_size);
            block.leaves.reserve(block.expected.max(1));
        }
        let at = block.bytes.len();
        block.bytes.resize(at + len, 0);
        let p = &mut self.pending[self.count];
        write_leaf_body(block.codec, view, quant, &mut block.bytes[at..], id, p)
            .map_err(|e| at_origin(e, origin))
            .inspect_err(|_| block.bytes.truncate(at))?;
        block.leaves.push(EncodedLeaf {
            origin,
            at: at as u32,
            len: len as u32,
            log2_bits: quant.map_or(0, |q| q.log2_bits),
            stats: NodeStats::EMPTY,
        });
        block.unfinished += 1;
        self.targets[self.count] = (which, block.leaves.len() - 1);
        self.count += 1;
        if self.count == LANES {
            self.flush(blocks);
        }
        Ok(())
    }

    /// Forgets the pending leaves (their blocks are being dropped, say after an error):
    /// they must not be finished into the next blocks.
    pub fn discard(&mut self) {
        self.count = 0;
    }

    /// Stores the mean and deviation of every pending leaf.
    pub fn flush(&mut self, blocks: &mut [EncodedBlock]) {
        let moments = welford_lanes(&self.pending[..self.count]);
        let pending = self.pending.iter().zip(&self.targets).zip(moments);
        for ((p, &(which, l)), m) in pending.take(self.count) {
            let block = &mut blocks[which];
            let leaf = &mut block.leaves[l];
            let dst = &mut block.bytes[leaf.at as usize..][..leaf.len as usize];
            leaf.stats = finish_leaf(p, m, dst);
            block.unfinished -= 1;
        }
        self.count = 0;
    }
}

/// A leaf's error named by its origin (an encoder does not know the leaf's index).
fn at_origin(e: FormatError, origin: Coord) -> FormatError {
    match e {
        FormatError::Corrupt { detail, .. } => invalid(format!("leaf at {origin:?}"), 0, detail),
        e => e,
    }
}
