//! The RoCEv2 invariant CRC (IBTA vol. 1 Annex A17.3.3; MRC 1.0 keeps RoCEv2's ICRC,
//! PROTOCOL.md "ICRC").
//!
//! CRC-32 (IEEE 802.3 polynomial, as `zlib.crc32`) over:
//! 1. 8 bytes of 0xFF standing in for the LRH of native InfiniBand;
//! 2. the IPv6 header with the fields routers change masked to 1s: traffic class, flow label,
//!    hop limit;
//! 3. the UDP header with its checksum masked to 1s;
//! 4. the BTH with its byte 4 (IBTA resv8a: FECN/BECN in IB) masked to 1s;
//! 5. everything after the BTH through the payload and pad.
//!
//! The 4-byte result goes on the wire least-significant byte first (as Linux rxe and scapy's
//! RoCE layer write it).
//!
//! MRC decisions \[I\]:
//! - In SRv6 mode the ICRC starts at the **inner** IPv6 header: the outer one (DA = uSID path,
//!   shifted every hop; SRH segments left decremented) is not end to end.
//! - The `rtx`/`ts` bits MRC puts in BTH byte 8 are **covered**: the sender sets them and no
//!   switch touches them, unlike the ECN-like bits of byte 4. Only byte 4 is masked, as IBTA
//!   says.

use super::bth::BTH_LEN;
use super::udp::UDP_HEADER_LEN;
use super::{Result, check_len};
use mrc_srv6::wire::IPV6_HEADER_LEN;

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// Bytes the ICRC needs at least: IPv6 + UDP + BTH.
pub const ICRC_MIN_COVERED: usize = IPV6_HEADER_LEN + UDP_HEADER_LEN + BTH_LEN;

/// The running CRC the ICRC is computed with: CRC-32/ISO-HDLC on the fastest path the CPU
/// offers (`mrc-crc`: 512-bit VPCLMULQDQ folds, fused with the payload copy).
pub type Crc = mrc_crc::Crc32;

/// A sender's ICRC over a frame's headers (`head`, already written, not yet folded) and then
/// its payload, gathered piece by piece: the first piece is folded after the headers with one
/// reduction for both (`mrc_crc`'s `update_after`; issue #13, "ICRC cheaply").
#[derive(Debug)]
pub struct Running<'h> {
    crc: Crc,
    head: &'h [u8],
}

impl<'h> Running<'h> {
    /// `crc` continued over `head` when the first bytes come (or at [`finish`](Self::finish)).
    pub fn new(crc: Crc, head: &'h [u8]) -> Self {
        Self { crc, head }
    }

    /// Fold `data` in (after the headers, if they are still pending).
    #[inline]
    pub fn update(&mut self, data: &[u8]) {
        match core::mem::take(&mut self.head) {
            [] => self.crc.update(data),
            head => self.crc.update_after(head, data),
        }
    }

    /// Copy `src` into `dst` (same length) and fold it in (after the pending headers).
    #[inline]
    pub fn update_copy(&mut self, dst: &mut [u8], src: &[u8]) {
        match core::mem::take(&mut self.head) {
            [] => self.crc.update_copy(dst, src),
            head => self.crc.update_copy_after(head, dst, src),
        }
    }

    /// The CRC of everything fed, the headers included.
    #[inline]
    pub fn finish(mut self) -> Crc {
        if !self.head.is_empty() {
            self.crc.update(self.head);
        }
        self.crc
    }
}

/// Bytes of the masked block: the LRH stand-in, IPv6, UDP and BTH.
#[cfg(test)]
const MASKED_LEN: usize = 8 + IPV6_HEADER_LEN + UDP_HEADER_LEN + BTH_LEN;

/// The ICRC of `covered`: the (inner) IPv6 header through the end of payload and pad,
/// without the ICRC trailer itself. One CRC pass over the bytes as they are ([`start`]).
pub fn compute(covered: &[u8]) -> Result<u32> {
    check_len(covered, ICRC_MIN_COVERED, "ICRC-covered headers")?;
    let mut crc = start(covered);
    crc.update(covered);
    Ok(crc.finalize())
}

/// The CRC to run over `covered` **as it is** (its first byte on; at least
/// [`ICRC_MIN_COVERED`] bytes, callers check) so that it ends at the ICRC: the state after the
/// LRH stand-in, adjusted for the masked fields (issue #13, "ICRC cheaply": one pass over the
/// contiguous frame, no masked copy of the headers and no CRC reduction between them and the
/// payload).
///
/// Why it works: the CRC is linear, so masking (XORing a delta into a byte) can be done to the
/// start state instead (`mrc_crc::start_delta`). [`ADJUST`] holds those start changes for the
/// eight masked byte offsets, so the start costs eight lookups.
///
/// The change is linear in the delta too: masking XORs in `mask & !byte` = `mask ^ (mask &
/// byte)`, so the start is a constant ([`ALL_MASKED`], every masked byte zero) changed by the
/// masked bits the bytes have set. The UDP checksum and BTH resv8a are zero on nearly every
/// frame (the engine sends no UDP checksum and no FECN/BECN), so they cost a test each, not
/// three lookups (issue #13).
#[inline]
pub fn start(covered: &[u8]) -> Crc {
    let h = covered
        .first_chunk::<ICRC_MIN_COVERED>()
        .expect("callers check ICRC_MIN_COVERED");
    let set = |i: usize| {
        let (at, mask) = MASKED[i];
        ADJUST[i][usize::from(mask & h[at])]
    };
    // Traffic class, flow label, hop limit: always looked up.
    let mut state = ALL_MASKED ^ set(0) ^ set(1) ^ set(2) ^ set(3) ^ set(4);
    if h[MASKED[5].0] | h[MASKED[6].0] | h[MASKED[7].0] != 0 {
        state ^= set(5) ^ set(6) ^ set(7);
    }
    Crc::from_state(state)
}

/// [`start`] of headers whose masked bytes are all zero: the state after the LRH stand-in
/// changed by every masked bit.
const ALL_MASKED: u32 = {
    let mut state = AFTER_LRH;
    let mut i = 0;
    while i < 8 {
        state ^= mrc_crc::start_delta(MASKED[i].0, MASKED[i].1);
        i += 1;
    }
    state
};

/// The masked bytes of IPv6 | UDP | BTH (offsets from the IPv6 header) and the bits set:
/// traffic class and flow label, hop limit, the UDP checksum, BTH resv8a (FECN/BECN).
const MASKED: [(usize, u8); 8] = {
    let udp = IPV6_HEADER_LEN;
    let bth = udp + UDP_HEADER_LEN;
    [
        (0, 0x0f),
        (1, 0xff),
        (2, 0xff),
        (3, 0xff),
        (7, 0xff),
        (udp + 6, 0xff),
        (udp + 7, 0xff),
        (bth + 4, 0xff),
    ]
};

/// The CRC state after the LRH stand-in (8 bytes of 0xFF).
const AFTER_LRH: u32 = mrc_crc::hash_const(&[0xff; 8]);

/// `ADJUST[i][d]`: the start change equal to a delta `d` at masked offset `MASKED[i].0` (see
/// [`start`]).
static ADJUST: [[u32; 256]; 8] = {
    let mut a = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 8 {
        let mut d = 0;
        while d < 256 {
            a[i][d] = mrc_crc::start_delta(MASKED[i].0, d as u8);
            d += 1;
        }
        i += 1;
    }
    a
};

/// The CRC after the LRH stand-in and the masked IPv6 | UDP | BTH at the start of `covered`,
/// from a masked copy: the reference [`start`] is checked against.
#[cfg(test)]
fn masked_headers(covered: &[u8]) -> Crc {
    let mut m = [0u8; MASKED_LEN];
    m[..8].fill(0xff);
    m[8..].copy_from_slice(&covered[..ICRC_MIN_COVERED]);
    mask(&mut m[8..]);
    let mut crc = Crc::new();
    crc.update(&m);
    crc
}

/// Set the variant fields of IPv6 | UDP | BTH (60 bytes) to ones.
#[cfg(test)]
fn mask(h: &mut [u8]) {
    h[0] |= 0x0f; // traffic class, upper nibble
    h[1..4].fill(0xff); // traffic class, lower nibble + flow label
    h[7] = 0xff; // hop limit
    let udp = IPV6_HEADER_LEN;
    h[udp + 6..udp + 8].fill(0xff); // UDP checksum
    h[udp + UDP_HEADER_LEN + 4] = 0xff; // BTH resv8a (FECN/BECN)
}

/// CRC-32 over the LRH stand-in, an already masked IP header, and `rest` (UDP | BTH | ...)
/// with the UDP checksum and BTH byte 4 masked. `rest` holds at least UDP + BTH. (IPv4 in
/// the ConnectX capture test.)
#[cfg(test)]
fn crc_after_ip(masked_ip: &[u8], rest: &[u8]) -> u32 {
    let mut h = Crc::new();
    h.update(&[0xff; 8]);
    h.update(masked_ip);
    let mut udp_bth = [0u8; UDP_HEADER_LEN + BTH_LEN];
    udp_bth.copy_from_slice(&rest[..UDP_HEADER_LEN + BTH_LEN]);
    udp_bth[6..8].fill(0xff); // UDP checksum
    udp_bth[UDP_HEADER_LEN + 4] = 0xff; // BTH resv8a (FECN/BECN)
    h.update(&udp_bth);
    h.update(&rest[UDP_HEADER_LEN + BTH_LEN..]);
    h.finalize()
}

/// Read an ICRC trailer.
pub fn read(trailer: &[u8; ICRC_LEN]) -> u32 {
    u32::from_le_bytes(*trailer)
}

/// Write an ICRC trailer.
pub fn write(icrc: u32, trailer: &mut [u8; ICRC_LEN]) {
    *trailer = icrc.to_le_bytes();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IPv6 (TC 0x12, flow label 0x54321, payload 28, UDP, hop limit 64, ::1 > ::2) | UDP
    /// 0xc001 > 4791 len 28 csum 0x1234 | BTH WRITE_ONLY qp 0x11 psn 5, byte 4 = 0xc0 (set,
    /// to prove it is masked) | 4 payload bytes.
    fn vector() -> Vec<u8> {
        let mut v = vec![
            0x61, 0x25, 0x43, 0x21, 0x00, 0x1c, 17, 64, //
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, //
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, //
            0xc0, 0x01, 0x12, 0xb7, 0x00, 0x1c, 0x12, 0x34, //
            0xca, 0x00, 0xff, 0xff, 0xc0, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x05,
        ];
        v.extend_from_slice(b"abcd");
        v
    }

    /// Computed independently with Python's zlib over the masked bytes:
    /// ```text
    /// python3 -c "import zlib; b=bytes.fromhex('ff'*8 + '6fffffff001c11ff' + '00'*15 + '01'
    ///   + '00'*15 + '02' + 'c00112b7001cffff' + 'ca00ffffff000011' + '80000005')
    ///   + b'abcd'; print(hex(zlib.crc32(b)))"
    /// ```
    const EXPECTED: u32 = 0x1ebd_af27;

    #[test]
    fn matches_zlib_over_masked_bytes() {
        assert_eq!(compute(&vector()).unwrap(), EXPECTED);
    }

    #[test]
    fn masked_fields_do_not_matter_and_the_rest_does() {
        let base = compute(&vector()).unwrap();
        let mut v = vector();
        v[1] ^= 0xff; // traffic class / flow label
        v[7] = 3; // hop limit
        v[46] ^= 0x55; // UDP checksum
        v[52] = 0; // BTH resv8a
        assert_eq!(compute(&v).unwrap(), base);
        for at in [4, 8, 40, 48, 56, 60, 63] {
            let mut v = vector();
            v[at] ^= 1;
            assert_ne!(compute(&v).unwrap(), base, "byte {at} must be covered");
        }
        // MRC's rtx flag in BTH byte 8 is covered.
        let mut v = vector();
        v[56] |= 0x40;
        assert_ne!(compute(&v).unwrap(), base);
    }

    /// A RoCEv2 CNP captured on a ConnectX-4 Lx (IPv4; from scapy's RoCE regression tests,
    /// secdev/scapy `test/contrib/roce.uts`): the hardware's ICRC is the last 4 bytes,
    /// 82 fd 00 2a. Checks the LRH stand-in, the BTH byte-4 mask (the CNP sets BECN there) and
    /// the trailer byte order against real hardware; IPv4 masks TOS, TTL and checksum instead.
    #[test]
    fn matches_a_connectx_capture() {
        const FRAME: &str = "e41d2dab2bc27cfe90643b32080045c2003c718c400040119161\
                             0a0011010a001201000012b700280000 8100ffff400001180000\
                             00000000000000000000000000000000000082fd002a";
        let hex: String = FRAME.split_whitespace().collect();
        let b: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let ip = &b[14..];
        let mut v4 = [0u8; 20];
        v4.copy_from_slice(&ip[..20]);
        v4[1] = 0xff; // TOS
        v4[8] = 0xff; // TTL
        v4[10..12].fill(0xff); // header checksum
        let end = b.len() - ICRC_LEN;
        let crc = crc_after_ip(&v4, &ip[20..end - 14]);
        let mut trailer = [0u8; ICRC_LEN];
        write(crc, &mut trailer);
        assert_eq!(trailer, [0x82, 0xfd, 0x00, 0x2a]);
    }

    /// The adjusted start over the bytes as they are equals the CRC of the masked copy, for
    /// every value of every masked byte and random headers and payloads.
    #[test]
    fn start_over_the_bytes_as_they_are_equals_the_masked_copy() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..2000usize {
            let len = ICRC_MIN_COVERED + (next() % 200) as usize;
            let mut v: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            // A third of the rounds with the UDP checksum and BTH resv8a zero, as the
            // engine's frames have them (`start` skips their lookups then).
            if round % 3 == 0 {
                for &(at, _) in &MASKED[5..] {
                    v[at] = 0;
                }
            }
            // Every value of one masked byte in turn, on top of random bytes.
            let (at, _) = MASKED[round % MASKED.len()];
            v[at] = (round / MASKED.len()) as u8;
            let mut reference = masked_headers(&v);
            reference.update(&v[ICRC_MIN_COVERED..]);
            let mut crc = start(&v);
            crc.update(&v);
            assert_eq!(crc.finalize(), reference.finalize(), "round {round}");
        }
    }

    #[test]
    fn short_input_is_an_error() {
        assert!(compute(&vector()[..59]).is_err());
    }

    #[test]
    fn trailer_is_little_endian() {
        let mut t = [0u8; 4];
        write(0x0102_0304, &mut t);
        assert_eq!(t, [4, 3, 2, 1]);
        assert_eq!(read(&t), 0x0102_0304);
    }
}
