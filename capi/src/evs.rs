//! EVs as the controller API names them (`include/mrc_ctl.h`, OCP controller API 1.0.1): EV
//! values, EV Format profiles, the fields of EXP and GEN EV profiles, the expansion of a
//! compact EV into the value a packet carries, the generation of GEN EVs, and the engine's
//! explicit EV list a QP gets from them ([`ExplicitEv`]).
//!
//! Expansion follows OCP's `examples/ev_expansion`: a compact EV is a bit string read from the
//! most significant bit of byte 0; each field takes as many of its bits as its mask has set,
//! lays them over `init_val` at the mask's bits (lowest first), and the field values are packed
//! one after the other, each as wide as its format field, from the most significant bit of
//! byte 0. A profile without fields uses its EVs as they are.
//!
//! What a packet carries, by format mode:
//! - STEV: the first 4 bytes, a 32-bit EV in network byte order, split between the UDP source
//!   port and the flow label as every mrc-rs EV is (PROTOCOL.md);
//! - UDP: the first 2 bytes, the UDP source port (network byte order); flow label 0;
//! - SRv6: bytes 0-15 the outer destination address, bytes 16-31 the single SRH segment (none
//!   when all zero).

use core::fmt::Write as _;
use core::net::Ipv6Addr;

use mrc_transport::config::{ExplicitEv, ExplicitValue};
use mrc_transport::ev::SrPath;
use mrc_transport::wire::EntropyOrder;

use crate::{Fail, fail, invalid};

pub const MRC_CTL_EV_FMT_MODE_STEV: i32 = 1 << 0;
pub const MRC_CTL_EV_FMT_MODE_SRV6: i32 = 1 << 1;
pub const MRC_CTL_EV_FMT_MODE_UDP: i32 = 1 << 2;

pub const MRC_CTL_EV_GOOD: i32 = 1 << 0;
pub const MRC_CTL_EV_ASSUMED_BAD: i32 = 1 << 1;
pub const MRC_CTL_EV_DENIED: i32 = 1 << 2;
pub const MRC_CTL_EV_UNKNOWN: i32 = i32::MIN; // 1 << 31

/// Bytes of an EV value (`MRC_CTL_EV_MAX_BYTES`).
pub const EV_BYTES: usize = 32;
/// Fields of one profile at most (EV Format or EV profile).
pub const MAX_FIELDS: usize = 32;

/// `struct mrc_ctl_ev`: an EV value and the port (1-based) it leaves by. All zero is
/// `MRC_CTL_EV_UNPOPULATED`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct mrc_ctl_ev {
    pub val: [u8; EV_BYTES],
    pub port: u8,
}

impl mrc_ctl_ev {
    pub const UNPOPULATED: Self = Self {
        val: [0; EV_BYTES],
        port: 0,
    };

    pub fn is_unpopulated(&self) -> bool {
        *self == Self::UNPOPULATED
    }

    /// `hex.port` (the profile files' form).
    pub fn encode(&self) -> String {
        let mut s = String::with_capacity(2 * EV_BYTES + 4);
        for b in self.val {
            let _ = write!(s, "{b:02x}");
        }
        let _ = write!(s, ".{}", self.port);
        s
    }

    pub fn decode(s: &str) -> Option<Self> {
        let (hex, port) = s.split_once('.')?;
        if hex.len() != 2 * EV_BYTES {
            return None;
        }
        let mut val = [0u8; EV_BYTES];
        for (i, b) in val.iter_mut().enumerate() {
            *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Self {
            val,
            port: port.parse().ok()?,
        })
    }
}

/// A list of EVs in a profile file: `hex.port` joined by commas.
pub fn encode_list(evs: &[mrc_ctl_ev]) -> String {
    evs.iter()
        .map(mrc_ctl_ev::encode)
        .collect::<Vec<_>>()
        .join(",")
}

pub fn decode_list(s: Option<&String>) -> Vec<mrc_ctl_ev> {
    s.map(|s| {
        s.split(',')
            .filter(|e| !e.is_empty())
            .filter_map(mrc_ctl_ev::decode)
            .collect()
    })
    .unwrap_or_default()
}

/// `struct mrc_ctl_ev_field`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_ctl_ev_field {
    pub width: u32,
    pub init_val: u32,
    pub min_val: u32,
    pub max_val: u32,
    pub mask: u32,
}

/// `struct mrc_ctl_ev_fmt_field`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_ctl_ev_fmt_field {
    pub width: u8,
}

pub fn encode_fields(f: &[mrc_ctl_ev_field]) -> String {
    f.iter()
        .map(|f| {
            format!(
                "{}/{}/{}/{}/{}",
                f.width, f.init_val, f.min_val, f.max_val, f.mask
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

pub fn decode_fields(s: Option<&String>) -> Vec<mrc_ctl_ev_field> {
    let Some(s) = s else { return Vec::new() };
    s.split(',')
        .filter_map(|f| {
            let v: Vec<u32> = f.split('/').filter_map(|x| x.parse().ok()).collect();
            (v.len() == 5).then(|| mrc_ctl_ev_field {
                width: v[0],
                init_val: v[1],
                min_val: v[2],
                max_val: v[3],
                mask: v[4],
            })
        })
        .collect()
}

/// An EV Format: its mode and field widths (bits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    pub mode: i32,
    pub widths: Vec<u32>,
}

impl Format {
    /// The format of EV Format profile 0, the device's own: STEV as two 16-bit fields on an
    /// ECMP device, SRv6 as a 32-bit locator and six 16-bit uSIDs on an SRv6 one.
    pub fn native(srv6: bool) -> Self {
        if srv6 {
            Self {
                mode: MRC_CTL_EV_FMT_MODE_SRV6,
                widths: vec![32, 16, 16, 16, 16, 16, 16],
            }
        } else {
            Self {
                mode: MRC_CTL_EV_FMT_MODE_STEV,
                widths: vec![16, 16],
            }
        }
    }

    /// Bits of an expanded EV the mode holds.
    pub fn mode_bits(mode: i32) -> u32 {
        match mode {
            MRC_CTL_EV_FMT_MODE_STEV => 32,
            MRC_CTL_EV_FMT_MODE_UDP => 16,
            _ => 256,
        }
    }
}

/// Checks EV Format fields for `mode`: 1 to [`MAX_FIELDS`] fields of 1..=128 bits whose sum
/// fits the mode (32 bits STEV, 16 UDP, 256 SRv6).
pub fn check_format(mode: i32, widths: &[u32]) -> Result<(), Fail> {
    if widths.len() > MAX_FIELDS {
        return Err(fail(
            libc::E2BIG,
            format!("{} format fields: at most {MAX_FIELDS}", widths.len()),
        ));
    }
    if widths.is_empty() || widths.iter().any(|&w| w == 0 || w > 128) {
        return Err(invalid("format fields: 1 or more, each 1..=128 bits wide"));
    }
    let sum: u32 = widths.iter().sum();
    if sum > Format::mode_bits(mode) {
        return Err(fail(
            libc::E2BIG,
            format!(
                "format fields of {sum} bits: the mode holds {}",
                Format::mode_bits(mode)
            ),
        ));
    }
    Ok(())
}

fn ones(bits: u32) -> u32 {
    if bits >= 32 {
        u32::MAX
    } else {
        (1 << bits) - 1
    }
}

/// Checks EV profile fields against their format (OCP's restrictions): no more fields than
/// the format, each no wider than 32 bits nor its format field, `init_val` and `mask` within
/// the width, `min_val <= max_val` within the mask's bit count.
pub fn check_fields(fields: &[mrc_ctl_ev_field], fmt: &Format) -> Result<(), Fail> {
    if fields.len() > fmt.widths.len() {
        return Err(fail(
            libc::E2BIG,
            format!(
                "{} EV fields: the EV Format has {}",
                fields.len(),
                fmt.widths.len()
            ),
        ));
    }
    for (i, (f, &fw)) in fields.iter().zip(&fmt.widths).enumerate() {
        if f.width == 0 || f.width > 32 || f.width > fw {
            return Err(invalid(&format!(
                "EV field {i}: width {} (1..=32, at most its format field's {fw})",
                f.width
            )));
        }
        let w = ones(f.width);
        if f.init_val & !w != 0 || f.mask & !w != 0 {
            return Err(invalid(&format!(
                "EV field {i}: init_val or mask wider than {} bits",
                f.width
            )));
        }
        if f.min_val > f.max_val || f.max_val > ones(f.mask.count_ones()) {
            return Err(invalid(&format!(
                "EV field {i}: min_val..=max_val must fit the mask's {} bits",
                f.mask.count_ones()
            )));
        }
    }
    Ok(())
}

/// `n` (<= 32) bits of `v` from bit `off` (bit 0 = the most significant bit of byte 0).
fn take_bits(v: &[u8; EV_BYTES], off: u32, n: u32) -> u32 {
    let mut out = 0u32;
    for b in 0..n {
        let at = (off + b) as usize;
        let bit = at < 8 * EV_BYTES && v[at / 8] & (0x80 >> (at % 8)) != 0;
        out = (out << 1) | u32::from(bit);
    }
    out
}

/// Writes `value` right-aligned in `width` bits from bit `off` (wider than 32: zero-filled on
/// the left).
fn put_bits(v: &mut [u8; EV_BYTES], off: u32, width: u32, value: u32) {
    for b in 0..width {
        let from_right = width - 1 - b;
        let bit = from_right < 32 && value & (1 << from_right) != 0;
        let at = (off + b) as usize;
        if bit && at < 8 * EV_BYTES {
            v[at / 8] |= 0x80 >> (at % 8);
        }
    }
}

/// `init_val` with the mask's bits (lowest first) replaced by `bits`' (lowest first).
fn overlay(init: u32, bits: u32, mask: u32) -> u32 {
    let mut out = init;
    let mut k = 0;
    for i in 0..32 {
        if mask & (1 << i) != 0 {
            out &= !(1 << i);
            if bits & (1 << k) != 0 {
                out |= 1 << i;
            }
            k += 1;
        }
    }
    out
}

/// The value a packet carries for the compact EV `ev` (see the module documentation).
pub fn expand(ev: &[u8; EV_BYTES], fields: &[mrc_ctl_ev_field], fmt: &Format) -> [u8; EV_BYTES] {
    if fields.is_empty() {
        return *ev;
    }
    let mut out = [0u8; EV_BYTES];
    let (mut src, mut dst) = (0, 0);
    for (f, &fw) in fields.iter().zip(&fmt.widths) {
        let mut value = f.init_val;
        if f.mask != 0 {
            let n = f.mask.count_ones();
            value = overlay(value, take_bits(ev, src, n), f.mask);
            src += n;
        }
        put_bits(&mut out, dst, fw, value);
        dst += fw;
    }
    out
}

/// A small generator for GEN EVs (xorshift64*, seeded from the clock and the process).
#[derive(Debug)]
pub struct Gen(u64);

impl Gen {
    pub fn new() -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        Self((t ^ (u64::from(std::process::id()) << 32)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn between(&mut self, lo: u32, hi: u32) -> u32 {
        let span = u64::from(hi - lo) + 1;
        lo + (self.next() % span) as u32
    }
}

/// `count` generated compact EVs (MRC_CTL_EV_MODE_GEN): each field's bits drawn in
/// `min_val..=max_val`, packed in field order; distinct while the fields allow it; EV `i`
/// leaves by port `i % planes + 1` (EVs spread evenly over the planes).
pub fn generate(
    fields: &[mrc_ctl_ev_field],
    count: usize,
    planes: u8,
    g: &mut Gen,
) -> Vec<mrc_ctl_ev> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let port = (i % usize::from(planes.max(1))) as u8 + 1;
        let mut ev = mrc_ctl_ev {
            val: [0; EV_BYTES],
            port,
        };
        for _ in 0..32 {
            ev.val = [0; EV_BYTES];
            let mut off = 0;
            for f in fields.iter().filter(|f| f.mask != 0) {
                let n = f.mask.count_ones();
                put_bits(&mut ev.val, off, n, g.between(f.min_val, f.max_val));
                off += n;
            }
            if seen.insert(ev) {
                break;
            }
        }
        out.push(ev);
    }
    out
}

/// What the engine needs of an EXP or GEN profile: its EVs as engine values, and for each the
/// controller's compact EV (the live side maps the engine's EVs back to the controller's).
#[derive(Debug, Clone)]
pub struct Listed {
    pub engine: Vec<ExplicitEv>,
    pub compact: Vec<mrc_ctl_ev>,
}

/// The engine value of a compact EV of a profile with `fields` in format `fmt`.
pub fn engine_value(
    ev: &mrc_ctl_ev,
    fields: &[mrc_ctl_ev_field],
    fmt: &Format,
    order: EntropyOrder,
) -> ExplicitEv {
    let x = expand(&ev.val, fields, fmt);
    let value = match fmt.mode {
        MRC_CTL_EV_FMT_MODE_SRV6 => {
            let da: [u8; 16] = x[..16].try_into().unwrap_or_default();
            let seg: [u8; 16] = x[16..].try_into().unwrap_or_default();
            ExplicitValue::Route(SrPath {
                outer_da: Ipv6Addr::from(da),
                segment: (seg != [0; 16]).then(|| Ipv6Addr::from(seg)),
            })
        }
        MRC_CTL_EV_FMT_MODE_UDP => {
            ExplicitValue::Entropy(order.join(u16::from_be_bytes([x[0], x[1]]), 0))
        }
        _ => ExplicitValue::Entropy(u32::from_be_bytes([x[0], x[1], x[2], x[3]])),
    };
    ExplicitEv {
        plane: ev.port.saturating_sub(1),
        value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(width: u32, init_val: u32, min_val: u32, max_val: u32, mask: u32) -> mrc_ctl_ev_field {
        mrc_ctl_ev_field {
            width,
            init_val,
            min_val,
            max_val,
            mask,
        }
    }

    #[test]
    fn no_fields_keep_the_ev_as_given() {
        let mut v = [0u8; EV_BYTES];
        v[..4].copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(expand(&v, &[], &Format::native(false)), v);
    }

    #[test]
    fn expansion_packs_fields_msb_first_with_masks_and_init_values() {
        // Format 16 + 16; field 0 fixed 0xabcd; field 1 takes 8 EV bits into its low byte
        // over init 0x1200.
        let fmt = Format::native(false);
        let fields = [
            field(16, 0xabcd, 0, 0, 0),
            field(16, 0x1200, 0, 255, 0x00ff),
        ];
        let mut ev = [0u8; EV_BYTES];
        ev[0] = 0x5a;
        let x = expand(&ev, &fields, &fmt);
        assert_eq!(&x[..4], &[0xab, 0xcd, 0x12, 0x5a]);
        assert!(x[4..].iter().all(|&b| b == 0));
        // A scattered mask: bits 0 and 15 from the EV's two first bits (lowest mask bit first).
        let fields = [field(16, 0, 0, 3, 0x8001)];
        ev[0] = 0b1000_0000; // first EV bit 1, second 0: extracted 0b10
        let x = expand(&ev, &fields, &fmt);
        assert_eq!(&x[..2], &[0x80, 0x00]);
    }

    #[test]
    fn wider_format_fields_are_zero_filled_on_the_left() {
        let fmt = Format {
            mode: MRC_CTL_EV_FMT_MODE_SRV6,
            widths: vec![64, 16],
        };
        let fields = [field(32, 0xfc00_0001, 0, 0, 0), field(16, 0x0102, 0, 0, 0)];
        let x = expand(&[0; EV_BYTES], &fields, &fmt);
        assert_eq!(&x[..10], &[0, 0, 0, 0, 0xfc, 0, 0, 1, 1, 2]);
    }

    #[test]
    fn fields_are_checked_against_their_format() {
        let fmt = Format::native(false);
        assert!(check_fields(&[field(16, 0, 0, 255, 0xff)], &fmt).is_ok());
        let e = |f: &[mrc_ctl_ev_field]| check_fields(f, &fmt).unwrap_err().0;
        assert_eq!(e(&[field(17, 0, 0, 0, 0)]), libc::EINVAL); // wider than its format field
        assert_eq!(e(&[field(8, 0x100, 0, 0, 0)]), libc::EINVAL); // init_val too wide
        assert_eq!(e(&[field(8, 0, 0, 0, 0x100)]), libc::EINVAL); // mask outside the width
        assert_eq!(e(&[field(8, 0, 0, 4, 0x3)]), libc::EINVAL); // max_val beyond 2 mask bits
        assert_eq!(e(&[field(8, 0, 3, 2, 0x3)]), libc::EINVAL); // min > max
        assert_eq!(e(&[field(8, 0, 0, 0, 0); 3]), libc::E2BIG); // more fields than the format
        assert!(check_format(MRC_CTL_EV_FMT_MODE_STEV, &[16, 16]).is_ok());
        assert_eq!(
            check_format(MRC_CTL_EV_FMT_MODE_STEV, &[16, 17])
                .unwrap_err()
                .0,
            libc::E2BIG
        );
        assert_eq!(
            check_format(MRC_CTL_EV_FMT_MODE_UDP, &[0]).unwrap_err().0,
            libc::EINVAL
        );
    }

    #[test]
    fn generated_evs_are_distinct_in_range_and_spread_over_planes() {
        let fields = [field(16, 0xc000, 0, 0, 0), field(16, 0, 10, 500, 0x01ff)];
        let evs = generate(&fields, 64, 4, &mut Gen::new());
        assert_eq!(evs.len(), 64);
        let set: std::collections::HashSet<_> = evs.iter().collect();
        assert_eq!(set.len(), 64);
        let fmt = Format::native(false);
        for (i, e) in evs.iter().enumerate() {
            assert_eq!(usize::from(e.port), i % 4 + 1);
            let x = expand(&e.val, &fields, &fmt);
            let v = u32::from_be_bytes([x[0], x[1], x[2], x[3]]);
            assert_eq!(v >> 16, 0xc000);
            assert!((10..=500).contains(&(v & 0x1ff)), "{v:#x}");
        }
    }

    #[test]
    fn values_round_trip_through_the_profile_files() {
        let mut e = mrc_ctl_ev::UNPOPULATED;
        e.val[0] = 0xfc;
        e.val[31] = 7;
        e.port = 3;
        assert_eq!(mrc_ctl_ev::decode(&e.encode()), Some(e));
        let list = [e, mrc_ctl_ev::UNPOPULATED];
        assert_eq!(decode_list(Some(&encode_list(&list))), list);
        let f = [field(16, 1, 2, 3, 4)];
        assert_eq!(decode_fields(Some(&encode_fields(&f))), f);
    }

    #[test]
    fn engine_values_by_format_mode() {
        let mut e = mrc_ctl_ev::UNPOPULATED;
        e.val[..4].copy_from_slice(&[0x12, 0x34, 0x56, 0x78]);
        e.port = 2;
        let stev = engine_value(&e, &[], &Format::native(false), EntropyOrder::default());
        assert_eq!(stev.plane, 1);
        assert_eq!(stev.value, ExplicitValue::Entropy(0x1234_5678));
        let udp = Format {
            mode: MRC_CTL_EV_FMT_MODE_UDP,
            widths: vec![16],
        };
        let u = engine_value(&e, &[], &udp, EntropyOrder::default());
        assert_eq!(
            u.value,
            ExplicitValue::Entropy(EntropyOrder::default().join(0x1234, 0))
        );
        let da: Ipv6Addr = "fc00:0:1:2:3::".parse().unwrap();
        e.val[..16].copy_from_slice(&da.octets());
        let s = engine_value(&e, &[], &Format::native(true), EntropyOrder::default());
        assert_eq!(
            s.value,
            ExplicitValue::Route(SrPath {
                outer_da: da,
                segment: None
            })
        );
    }
}
