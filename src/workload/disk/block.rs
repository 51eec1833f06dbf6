//! What perflab writes in every sector, and how a sector read back is
//! judged. Each 512-byte sector of every write holds a header — a magic
//! number, a CRC-32C of the rest of the sector, the sector's offset, the
//! write's generation (a counter of the file's writes, kept in the
//! [`super::ledger`]) and the file's id — and a payload derived from the
//! generation and the offset. A sector read back is intact when its CRC
//! holds, it names its own offset and the file, and its generation is no
//! older than the last write perflab saw acknowledged there: a torn, lost,
//! misdirected or altered write fails one of these.
//!
//! Layout, little-endian: magic u32 | crc32c u32 (of bytes 8..512) |
//! offset u64 | generation u64 | file id u64 | 480 payload bytes.

use super::access::SECTOR;

const MAGIC: u32 = 0x3142_4c50; // "PLB1"
const SECTOR_BYTES: usize = SECTOR as usize;

/// Stamps every sector of `buf` (a whole number of sectors) as written at
/// `offset` by write `generation` of file `file_id`.
pub(crate) fn stamp(buf: &mut [u8], offset: u64, generation: u64, file_id: u64) {
    for (i, sector) in buf.chunks_exact_mut(SECTOR_BYTES).enumerate() {
        let at = offset + i as u64 * SECTOR;
        sector[8..16].copy_from_slice(&at.to_le_bytes());
        sector[16..24].copy_from_slice(&generation.to_le_bytes());
        sector[24..32].copy_from_slice(&file_id.to_le_bytes());
        let mut word = (generation ^ at.rotate_left(17)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for chunk in sector[32..].chunks_exact_mut(8) {
            chunk.copy_from_slice(&word.to_le_bytes());
            word = word.rotate_left(7) ^ at;
        }
        let crc = crc32c::crc32c(&sector[8..]);
        sector[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        sector[4..8].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Why a sector read back is not what perflab wrote there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mismatch {
    /// No perflab header: never written by perflab, or overwritten.
    NoHeader,
    /// The header is there but the CRC fails: altered or torn inside.
    Checksum,
    /// A perflab sector of another offset: a misdirected write.
    Offset { found: u64 },
    /// A sector of another perflab file.
    File,
    /// Older than the last write acknowledged there: a lost write.
    Stale { found: u64, expected: u64 },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::NoHeader => f.write_str("no perflab header (overwritten by something else)"),
            Mismatch::Checksum => f.write_str("its CRC-32C fails (altered or torn)"),
            Mismatch::Offset { found } => {
                write!(f, "it holds the sector of offset {found} (misdirected)")
            }
            Mismatch::File => f.write_str("it belongs to another file"),
            Mismatch::Stale { found, expected } => write!(
                f,
                "it holds write {found}, older than write {expected} acknowledged there (lost)"
            ),
        }
    }
}

/// Checks one sector read at `offset`: intact, of this file, and no older
/// than `acknowledged`. Returns its generation.
pub(crate) fn check(
    sector: &[u8],
    offset: u64,
    file_id: u64,
    acknowledged: u64,
) -> Result<u64, Mismatch> {
    let word = |r: std::ops::Range<usize>| {
        let mut b = [0u8; 8];
        b[..r.len()].copy_from_slice(&sector[r]);
        u64::from_le_bytes(b)
    };
    if sector.len() != SECTOR_BYTES || word(0..4) != u64::from(MAGIC) {
        return Err(Mismatch::NoHeader);
    }
    if word(4..8) != u64::from(crc32c::crc32c(&sector[8..])) {
        return Err(Mismatch::Checksum);
    }
    if word(24..32) != file_id {
        return Err(Mismatch::File);
    }
    let found = word(8..16);
    if found != offset {
        return Err(Mismatch::Offset { found });
    }
    let generation = word(16..24);
    if generation < acknowledged {
        return Err(Mismatch::Stale {
            found: generation,
            expected: acknowledged,
        });
    }
    Ok(generation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamped_block_checks_and_every_fault_is_named() {
        let mut buf = vec![0u8; 4096];
        stamp(&mut buf, 8192, 7, 42);
        for (i, s) in buf.chunks(512).enumerate() {
            assert_eq!(check(s, 8192 + 512 * i as u64, 42, 7), Ok(7));
        }
        let first = &buf[..512];
        assert_eq!(
            check(first, 8192, 42, 8),
            Err(Mismatch::Stale {
                found: 7,
                expected: 8
            })
        );
        assert_eq!(
            check(first, 8704, 42, 0),
            Err(Mismatch::Offset { found: 8192 })
        );
        assert_eq!(check(first, 8192, 43, 0), Err(Mismatch::File));
        let mut flipped = first.to_vec();
        flipped[300] ^= 1;
        assert_eq!(check(&flipped, 8192, 42, 0), Err(Mismatch::Checksum));
        assert_eq!(check(&[0u8; 512], 8192, 42, 0), Err(Mismatch::NoHeader));
        assert_eq!(check(&[0u8; 10], 8192, 42, 0), Err(Mismatch::NoHeader));
        // Two writes of the same place differ in their payload, not only the header.
        let mut again = vec![0u8; 512];
        stamp(&mut again, 8192, 8, 42);
        assert_ne!(again[32..], buf[32..512]);
    }
}
