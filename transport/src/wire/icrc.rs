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

/// Bytes of the masked block: the LRH stand-in, IPv6, UDP and BTH.
const MASKED_LEN: usize = 8 + IPV6_HEADER_LEN + UDP_HEADER_LEN + BTH_LEN;

/// The ICRC of `covered`: the (inner) IPv6 header through the end of payload and pad,
/// without the ICRC trailer itself.
pub fn compute(covered: &[u8]) -> Result<u32> {
    check_len(covered, ICRC_MIN_COVERED, "ICRC-covered headers")?;
    let mut crc = masked_headers(covered);
    crc.update(&covered[ICRC_MIN_COVERED..]);
    Ok(crc.finalize())
}

/// The CRC after the LRH stand-in and the masked IPv6 | UDP | BTH at the start of `covered`
/// (at least [`ICRC_MIN_COVERED`] bytes; callers check): the state the ICRC continues from
/// over the rest of the headers, the payload and the pad. The whole masked block goes to the
/// CRC in one piece (68 bytes), not one update per header.
#[inline]
pub fn masked_headers(covered: &[u8]) -> Crc {
    let mut m = [0u8; MASKED_LEN];
    m[..8].fill(0xff);
    m[8..].copy_from_slice(&covered[..ICRC_MIN_COVERED]);
    mask(&mut m[8..]);
    let mut crc = Crc::new();
    crc.update(&m);
    crc
}

/// Set the variant fields of IPv6 | UDP | BTH (60 bytes) to ones.
#[inline(always)]
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
