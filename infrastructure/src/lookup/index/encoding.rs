//! The packed forms the index stores: RUCs packed into a `u64`, the hashes of words and of their
//! one-deletion neighbours, and the metadata kept beside each posting.

use std::hash::{BuildHasherDefault, Hasher};

/// A small, fast, non-cryptographic hasher (the FxHash mix) for the vocabulary while building.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(FX_SEED);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(FX_SEED);
    }
}

pub(crate) type FxBuild = BuildHasherDefault<FxHasher>;

/// Hash of `word` with the byte at `skip` left out (`usize::MAX`: nothing left out). Two words
/// with the same text have the same hash whichever way they were obtained.
pub(super) fn deletion_hash(word: &[u8], skip: usize) -> u64 {
    let mut h = FxHasher::default();
    for (i, &b) in word.iter().enumerate() {
        if i != skip {
            h.write(&[b]);
        }
    }
    // The length keeps "AB"+"C" apart from "A"+"BC"-style coincidences of the byte mix.
    h.write_u64(word.len() as u64 - u64::from(skip != usize::MAX));
    h.finish()
}

/// A RUC number (3–8 ASCII characters) packed big-endian into a `u64`, zero-padded on the right,
/// so that comparing packed values compares the texts, and a prefix is a range.
pub fn pack_ruc(ruc: &str) -> Option<u64> {
    let bytes = ruc.as_bytes();
    if bytes.is_empty() || bytes.len() > 8 || bytes.contains(&0) {
        return None;
    }
    let mut out = [0u8; 8];
    out[..bytes.len()].copy_from_slice(bytes);
    Some(u64::from_be_bytes(out))
}

/// The smallest and largest packed values that start with `prefix`.
pub(super) fn prefix_bounds(prefix: &str) -> Option<(u64, u64)> {
    let low = pack_ruc(prefix)?;
    let free_bits = 8 * (8 - prefix.len());
    let high = if free_bits == 64 {
        u64::MAX
    } else {
        low | ((1u64 << free_bits) - 1)
    };
    Some((low, high))
}

/// The text of a packed RUC.
pub(super) fn unpack_ruc(packed: u64, buffer: &mut [u8; 8]) -> &str {
    *buffer = packed.to_be_bytes();
    let len = buffer.iter().position(|&b| b == 0).unwrap_or(8);
    std::str::from_utf8(&buffer[..len]).unwrap_or("")
}

/// Posting metadata: position of the word in the name (its first occurrence; capped) and the
/// name's number of words (capped). A name that repeats a word is marked in `Index::repeat`
/// and ranked by [`Index::classify`](super::Index::classify) instead.
pub(super) const META_POS: u16 = 63;
pub(super) const META_LEN_SHIFT: u16 = 6;
