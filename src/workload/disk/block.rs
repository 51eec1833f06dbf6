//! What perflab writes in every sector, and how a sector read back is
//! judged. Each 512-byte sector of every write holds a header — a magic
//! number, a CRC-32C of the header, the sector's offset, the write's
//! generation (a counter of the file's writes, kept in the
//! [`super::ledger`]) and the file's id — and a payload derived from the
//! generation and the offset. A sector read back is intact when its
//! header's CRC holds, it names its own offset and the file, its payload is
//! the one its header derives, and its generation is no older than the
//! last write perflab saw acknowledged there: a torn, lost, misdirected or
//! altered write fails one of these.
//!
//! Layout, little-endian: magic u32 | crc32c u32 (of bytes 8..32) |
//! offset u64 | generation u64 | file id u64 | 480 payload bytes.
//!
//! The payload is a function of the header, so it is compared whole rather
//! than summed: the CRC covers the 24 header bytes only, and each payload
//! word is a fixed pattern's word plus the sector's seed (no chain from
//! one word to the next: vector adds). A CRC of every byte and a chained
//! payload made stamping an eighth of a RAM-backed write's CPU; this
//! layout, under 3% (perf, 4k random writes at depth 32). Files
//! written before this layout (magic `PLB1`: a CRC of bytes 8..512) are
//! still judged by their own rule.

use super::access::SECTOR;

/// This layout: "PLB2".
const MAGIC: u32 = 0x3242_4c50;
/// The first layout, whose CRC covered the payload: "PLB1".
const MAGIC_V1: u32 = 0x3142_4c50;
const SECTOR_BYTES: usize = SECTOR as usize;
/// Where the payload starts.
const PAYLOAD: usize = 32;

/// The word that the payload of the sector at `at`, written by
/// `generation`, is derived from.
fn payload_seed(at: u64, generation: u64) -> u64 {
    (generation ^ at.rotate_left(17)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
}

/// Words in a sector's payload.
const WORDS: usize = (SECTOR_BYTES - PAYLOAD) / 8;

/// A fixed pattern of distinct words (splitmix64's sequence). A sector's
/// payload word `i` is `PATTERN[i]` plus the sector's seed, so two writes
/// of one place (or two places of one write) differ in every word, and no
/// word waits for the one before it (one vector add for two words).
const PATTERN: [u64; WORDS] = {
    let mut words = [0u64; WORDS];
    let mut state = 0u64;
    let mut i = 0;
    while i < WORDS {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        words[i] = z ^ (z >> 31);
        i += 1;
    }
    words
};

/// The header's words: magic and CRC, offset, generation, file id.
const HEADER_WORDS: usize = PAYLOAD / 8;
/// A sector's 8-byte words.
const SECTOR_WORDS: usize = SECTOR_BYTES / 8;

/// Stamps every sector of `buf` (a whole number of sectors) as written at
/// `offset` by write `generation` of file `file_id`. The I/O buffers are
/// pages, so the sectors are written as aligned words, no call per word (a
/// slice copy per 8 bytes was a third of a 64 KiB write's CPU on a
/// RAM-backed device); a buffer that is not 8-byte aligned goes through a
/// word array of one sector at a time.
pub(crate) fn stamp(buf: &mut [u8], offset: u64, generation: u64, file_id: u64) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU has SSE 4.2, checked on the line above.
        return unsafe { stamp_sse42(buf, offset, generation, file_id) };
    }
    stamp_with(buf, offset, generation, file_id, header_crc);
}

/// [`stamp`] compiled for SSE 4.2, the header's CRC inlined in its loop.
///
/// # Safety
/// The CPU must have SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn stamp_sse42(buf: &mut [u8], offset: u64, generation: u64, file_id: u64) {
    // SAFETY: this function runs only where the CPU has SSE 4.2.
    stamp_with(buf, offset, generation, file_id, |w| unsafe {
        header_crc_sse42(w)
    });
}

/// [`stamp`] with the header's CRC computed by `crc`.
#[inline(always)]
fn stamp_with(
    buf: &mut [u8],
    offset: u64,
    generation: u64,
    file_id: u64,
    crc: impl Fn([u64; 3]) -> u32,
) {
    let whole = buf.len() - buf.len() % SECTOR_BYTES;
    let buf = &mut buf[..whole];
    let at = |i: usize| offset + i as u64 * SECTOR;
    if let Some(words) = as_words_mut(buf) {
        for (i, sector) in words.chunks_exact_mut(SECTOR_WORDS).enumerate() {
            stamp_words(sector, at(i), generation, file_id, &crc);
        }
        return;
    }
    for (i, sector) in buf.chunks_exact_mut(SECTOR_BYTES).enumerate() {
        let mut words = [0u64; SECTOR_WORDS];
        stamp_words(&mut words, at(i), generation, file_id, &crc);
        for (bytes, word) in sector.chunks_exact_mut(8).zip(words) {
            bytes.copy_from_slice(&word.to_ne_bytes());
        }
    }
}

/// `bytes` as words, where they start and end 8-byte aligned.
fn as_words_mut(bytes: &mut [u8]) -> Option<&mut [u64]> {
    // SAFETY: any 8 bytes are a valid u64 and any u64 valid bytes; the
    // words are the aligned middle that align_to_mut found, and the bytes
    // are borrowed mutably for as long as they are.
    let (head, words, tail) = unsafe { bytes.align_to_mut::<u64>() };
    (head.is_empty() && tail.is_empty()).then_some(words)
}

/// One sector's words (little-endian in memory): the header of `at`,
/// `generation` and `file_id`, and the payload they derive.
#[inline(always)]
fn stamp_words(
    words: &mut [u64],
    at: u64,
    generation: u64,
    file_id: u64,
    crc: impl Fn([u64; 3]) -> u32,
) {
    let seed = payload_seed(at, generation);
    for (word, pattern) in words[HEADER_WORDS..].iter_mut().zip(PATTERN) {
        *word = pattern.wrapping_add(seed).to_le();
    }
    words[1] = at.to_le();
    words[2] = generation.to_le();
    words[3] = file_id.to_le();
    let crc = crc([at, generation, file_id]);
    words[0] = (u64::from(MAGIC) | u64::from(crc) << 32).to_le();
}

/// The CRC-32C of a sector's header bytes 8..32 (the three words, each
/// little-endian), the value `crc32c::crc32c` gives for those bytes: on
/// x86-64 with SSE 4.2, three CRC32 instructions (the library's general
/// loop for 24 bytes was a third of a RAM-backed write's stamping).
fn header_crc(words: [u64; 3]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU has SSE 4.2, checked on the line above.
        return unsafe { header_crc_sse42(words) };
    }
    let mut bytes = [0u8; 24];
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    crc32c::crc32c(&bytes)
}

/// [`header_crc`] on SSE 4.2.
///
/// # Safety
/// The CPU must have SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
#[inline]
unsafe fn header_crc_sse42(words: [u64; 3]) -> u32 {
    // The instruction takes a word's bytes in little-endian order.
    let crc = words.iter().fold(u64::from(u32::MAX), |crc, &word| {
        std::arch::x86_64::_mm_crc32_u64(crc, word)
    });
    // It keeps the CRC in the low 32 bits.
    !(crc as u32)
}

/// Why a sector read back is not what perflab wrote there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mismatch {
    /// No perflab header: never written by perflab, or overwritten.
    NoHeader,
    /// The header is there but its CRC, or the payload it derives, fails:
    /// altered or torn inside.
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
            Mismatch::Checksum => f.write_str("its CRC-32C or its payload fails (altered or torn)"),
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
    if sector.len() != SECTOR_BYTES {
        return Err(Mismatch::NoHeader);
    }
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&sector[8 * i..8 * i + 8]);
        u64::from_le_bytes(b)
    };
    let (magic, crc) = (word(0) & 0xffff_ffff, word(0) >> 32);
    let (at, generation, file) = (word(1), word(2), word(3));
    let summed = if magic == u64::from(MAGIC) {
        header_crc([at, generation, file])
    } else if magic == u64::from(MAGIC_V1) {
        crc32c::crc32c(&sector[8..])
    } else {
        return Err(Mismatch::NoHeader);
    };
    if crc != u64::from(summed) {
        return Err(Mismatch::Checksum);
    }
    if magic == u64::from(MAGIC) {
        // The header holds: the payload must be the one it derives.
        let seed = payload_seed(at, generation);
        let altered = sector[PAYLOAD..]
            .chunks_exact(8)
            .zip(PATTERN)
            .any(|(chunk, word)| *chunk != word.wrapping_add(seed).to_le_bytes());
        if altered {
            return Err(Mismatch::Checksum);
        }
    }
    if file != file_id {
        return Err(Mismatch::File);
    }
    if at != offset {
        return Err(Mismatch::Offset { found: at });
    }
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

    #[test]
    fn the_header_crc_is_crc32c_of_its_bytes() {
        for words in [
            [8192u64, 7, u64::MAX],
            [0; 3],
            [1 << 40, 3, 0x0123_4567_89ab_cdef],
        ] {
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            assert_eq!(header_crc(words), crc32c::crc32c(&bytes), "{words:?}");
        }
        // The bytes on disk, as files already written hold them.
        let mut sector = vec![0u8; 512];
        stamp(&mut sector, 1 << 20, 4, 77);
        assert_eq!(&sector[0..4], b"PLB2");
        let crc = crc32c::crc32c(&sector[8..32]);
        assert_eq!(sector[4..8], crc.to_le_bytes());
        assert_eq!(sector[8..16], (1u64 << 20).to_le_bytes());
        let seed = payload_seed(1 << 20, 4);
        assert_eq!(sector[32..40], PATTERN[0].wrapping_add(seed).to_le_bytes());
    }

    #[test]
    fn a_buffer_off_the_word_grid_is_stamped_the_same() {
        let mut want = vec![0u8; 1024];
        // The allocator's blocks are 16-byte aligned: the words' path.
        assert!(as_words_mut(&mut want).is_some());
        stamp(&mut want, 4096, 9, 5);
        // The same two sectors one byte into a buffer, and a partial sector after.
        let mut odd = vec![0u8; 1024 + 1 + 100];
        stamp(&mut odd[1..], 4096, 9, 5);
        assert_eq!(odd[1..1025], want[..]);
        assert!(
            odd[1025..].iter().all(|&b| b == 0),
            "a partial sector was written"
        );
        assert_eq!(check(&odd[513..1025], 4608, 5, 9), Ok(9));
    }

    #[test]
    fn any_byte_changed_anywhere_in_a_sector_fails_it() {
        let mut buf = vec![0u8; 512];
        stamp(&mut buf, 4096, 3, 9);
        for byte in 0..512 {
            let mut changed = buf.clone();
            changed[byte] ^= 0x10;
            assert!(
                check(&changed, 4096, 9, 0).is_err(),
                "byte {byte} changed and the sector still checks"
            );
        }
        // Two places of one write differ in every payload word.
        let mut two = vec![0u8; 1024];
        stamp(&mut two, 0, 3, 9);
        let words = |s: &[u8]| s[32..].chunks(8).map(<[u8]>::to_vec).collect::<Vec<_>>();
        let (a, b) = (words(&two[..512]), words(&two[512..]));
        assert!(a.iter().zip(&b).all(|(x, y)| x != y));
    }

    /// A sector in the first layout, as perflab wrote it before the payload
    /// was derived word by word: a CRC of bytes 8..512.
    fn stamp_v1(sector: &mut [u8], at: u64, generation: u64, file_id: u64) {
        sector[8..16].copy_from_slice(&at.to_le_bytes());
        sector[16..24].copy_from_slice(&generation.to_le_bytes());
        sector[24..32].copy_from_slice(&file_id.to_le_bytes());
        let mut word = payload_seed(at, generation);
        for chunk in sector[PAYLOAD..].chunks_exact_mut(8) {
            chunk.copy_from_slice(&word.to_le_bytes());
            word = word.rotate_left(7) ^ at;
        }
        let crc = crc32c::crc32c(&sector[8..]);
        sector[0..4].copy_from_slice(&MAGIC_V1.to_le_bytes());
        sector[4..8].copy_from_slice(&crc.to_le_bytes());
    }

    #[test]
    fn files_written_in_the_first_layout_are_still_judged() {
        let mut old = vec![0u8; 512];
        stamp_v1(&mut old, 512, 5, 77);
        assert_eq!(check(&old, 512, 77, 5), Ok(5));
        assert_eq!(
            check(&old, 512, 77, 6),
            Err(Mismatch::Stale {
                found: 5,
                expected: 6
            })
        );
        old[400] ^= 1;
        assert_eq!(check(&old, 512, 77, 0), Err(Mismatch::Checksum));
    }
}
