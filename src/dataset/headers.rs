//! The structural check of a frame's grid headers before the frame is rendered: each grid's
//! header, read from wherever the frame's bytes are (host memory, a GPU slot read back),
//! must describe a grid of the size the dataset records ([`crate::format::Grid::check_header`]).
//! The player, `render` and the GPU tests call it alike.

use super::manifest::Frame;
use crate::format::Grid;

/// The first grid of a frame whose header fails the check: which and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("grid of attribute {attribute} at slot offset {offset}: {why}")]
pub struct BadGrid {
    /// The grid's attribute (manifest order).
    pub attribute: u32,
    /// Where the grid starts in the frame's slot image.
    pub offset: u64,
    /// What is wrong.
    pub why: String,
}

/// Reads a slot's bytes: (slot offset, buffer to fill), or why not.
pub type ReadSlot<'a> = dyn FnMut(usize, &mut [u8]) -> Result<(), String> + 'a;

/// Checks the header of every grid of `frame`, in a slot image of `slot_len` bytes whose
/// bytes `read` fills (only each header's first [`Grid::HEADER_PREFIX`] bytes are read).
pub fn check_frame_headers(
    frame: &Frame,
    slot_len: usize,
    read: &mut ReadSlot<'_>,
) -> Result<(), BadGrid> {
    let mut prefix = Vec::new();
    for g in &frame.grids {
        let bad = |why: String| BadGrid {
            attribute: g.attribute,
            offset: g.offset,
            why,
        };
        let span = usize::try_from(g.offset)
            .ok()
            .zip(usize::try_from(g.size).ok())
            .filter(|&(start, len)| start.checked_add(len).is_some_and(|end| end <= slot_len));
        let Some((start, len)) = span else {
            return Err(bad(format!("{} bytes do not fit the slot", g.size)));
        };
        prefix.resize(len.min(Grid::HEADER_PREFIX), 0);
        read(start, &mut prefix).map_err(|e| bad(format!("cannot read the header back: {e}")))?;
        match Grid::check_header(&prefix, g.size) {
            Ok(size) if size == g.size => {}
            Ok(size) => {
                return Err(bad(format!(
                    "the header says {size} bytes, the dataset {} bytes",
                    g.size
                )));
            }
            Err(e) => return Err(bad(format!("damaged grid header ({e})"))),
        }
    }
    Ok(())
}

/// [`ReadSlot`] over a slot image in host memory.
pub fn read_host_slot(slot: &[u8]) -> impl FnMut(usize, &mut [u8]) -> Result<(), String> + '_ {
    move |at, out| {
        let bytes = at
            .checked_add(out.len())
            .and_then(|end| slot.get(at..end))
            .ok_or_else(|| format!("{} bytes at {at} lie past the slot image", out.len()))?;
        out.copy_from_slice(bytes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::manifest::GridEntry;

    fn frame_of(grids: &[(u32, u64, u64)]) -> Frame {
        Frame {
            time: 0.0,
            grids: grids
                .iter()
                .map(|&(attribute, offset, size)| GridEntry {
                    attribute,
                    offset,
                    size,
                    checksum: 0,
                    brick: None,
                })
                .collect(),
            slot_size: 8192,
            extents: Vec::new(),
        }
    }

    #[test]
    fn a_grid_past_the_slot_or_with_garbage_for_a_header_is_named() {
        let slot = vec![0u8; 8192];
        let mut read = read_host_slot(&slot);
        let past = check_frame_headers(&frame_of(&[(2, 4096, 8192)]), slot.len(), &mut read);
        assert_eq!(
            past.unwrap_err().to_string(),
            "grid of attribute 2 at slot offset 4096: 8192 bytes do not fit the slot"
        );
        let zeros =
            check_frame_headers(&frame_of(&[(1, 0, 4096)]), slot.len(), &mut read).unwrap_err();
        assert_eq!((zeros.attribute, zeros.offset), (1, 0));
        assert!(zeros.why.starts_with("damaged grid header"), "{zeros}");
        assert!(check_frame_headers(&frame_of(&[]), slot.len(), &mut read).is_ok());
    }
}
