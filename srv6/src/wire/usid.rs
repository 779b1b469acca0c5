//! Micro-SID containers (RFC 9800, NEXT-C-SID flavor, "uSID").
//!
//! A 128-bit destination address holds a locator block (B bits) followed by a list of
//! N-bit uSIDs; the first one after the block is the active uSID, the bits after it are the
//! argument (the uSIDs still to come), and an all-zero uSID ends the list (End-of-Container).
//! MRC uses F3216: a 32-bit block and 16-bit uSIDs, six per address (brief §2.16).
//!
//! ```text
//! | block (B) | active uSID (N) | next uSID | ... | 0 (End-of-Container) ... |
//! |<---------- locator ------->|<------------- argument ------------------>|
//! ```
//!
//! A uN switch whose own uSID is active shifts the argument left by N bits and zero-fills the
//! end (RFC 9800 §4.1), then forwards on the new address. When the argument is already zero the
//! container is exhausted and the node falls back to plain End processing (which needs an SRH).

use core::fmt;
use core::net::Ipv6Addr;

/// One uSID value. 0 is End-of-Container and never names a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Usid(pub u32);

impl fmt::Display for Usid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}", self.0)
    }
}

/// Errors of uSID format and container construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UsidError {
    /// Block length and uSID length do not leave room for at least one uSID, or a uSID length
    /// outside 8..=32 bits.
    #[error("uSID format {block_bits}/{usid_bits} is not usable")]
    BadFormat { block_bits: u8, usid_bits: u8 },
    /// More uSIDs than fit after the block.
    #[error("{got} uSIDs do not fit in one container (at most {max})")]
    TooMany { got: usize, max: usize },
    /// A uSID value is wider than the format's uSID length.
    #[error("uSID {value:#x} does not fit in {usid_bits} bits")]
    TooWide { value: u32, usid_bits: u8 },
    /// A uSID of 0 would end the container early (End-of-Container).
    #[error("uSID 0 is End-of-Container and cannot be part of a path")]
    Zero,
}

/// Lengths of a uSID format: the locator block and each uSID (RFC 9800 §4, "LBL" and "LNL").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UsidFormat {
    block_bits: u8,
    usid_bits: u8,
}

impl Default for UsidFormat {
    fn default() -> Self {
        Self::F3216
    }
}

impl UsidFormat {
    /// 32-bit block, 16-bit uSIDs: six uSIDs per address. The only format MRC deploys.
    pub const F3216: Self = Self {
        block_bits: 32,
        usid_bits: 16,
    };

    /// A format with `block_bits` of block and `usid_bits` per uSID (8..=32, and at least one
    /// uSID after the block).
    pub const fn new(block_bits: u8, usid_bits: u8) -> Result<Self, UsidError> {
        if usid_bits < 8 || usid_bits > 32 || block_bits as u16 + usid_bits as u16 > 128 {
            return Err(UsidError::BadFormat {
                block_bits,
                usid_bits,
            });
        }
        Ok(Self {
            block_bits,
            usid_bits,
        })
    }

    /// Block length in bits.
    pub const fn block_bits(self) -> u8 {
        self.block_bits
    }

    /// uSID length in bits.
    pub const fn usid_bits(self) -> u8 {
        self.usid_bits
    }

    /// How many uSIDs one address holds after the block.
    pub const fn capacity(self) -> usize {
        ((128 - self.block_bits as u32) / self.usid_bits as u32) as usize
    }

    /// Prefix length that matches a block plus one uSID: what a switch routes on (48 for F3216).
    pub const fn locator_len(self) -> u8 {
        self.block_bits + self.usid_bits
    }

    const fn usid_mask(self) -> u128 {
        (1u128 << self.usid_bits) - 1
    }

    /// Mask of the block bits.
    const fn block_mask(self) -> u128 {
        if self.block_bits == 0 {
            0
        } else {
            !0u128 << (128 - self.block_bits as u32)
        }
    }

    /// Shift that brings slot `i` (0 = active) down to the low bits.
    const fn slot_shift(self, i: usize) -> u32 {
        128 - self.block_bits as u32 - (i as u32 + 1) * self.usid_bits as u32
    }

    /// The block bits of `addr` (the rest zeroed).
    pub fn block_of(self, addr: Ipv6Addr) -> Ipv6Addr {
        Ipv6Addr::from(u128::from(addr) & self.block_mask())
    }

    /// The address `block : usid ::`, the /[`locator_len`](Self::locator_len) prefix a switch
    /// that owns `usid` (or a route towards it) matches.
    pub fn locator(self, block: Ipv6Addr, usid: Usid) -> Ipv6Addr {
        let bits = (u128::from(block) & self.block_mask())
            | ((u128::from(usid.0) & self.usid_mask()) << self.slot_shift(0));
        Ipv6Addr::from(bits)
    }
}

/// A destination address read as a uSID container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UsidContainer {
    bits: u128,
    format: UsidFormat,
}

impl UsidContainer {
    /// `block : usids[0] : usids[1] : ... : 0 ...`. The block's bits past the block length are
    /// ignored.
    pub fn new(format: UsidFormat, block: Ipv6Addr, usids: &[Usid]) -> Result<Self, UsidError> {
        if usids.len() > format.capacity() {
            return Err(UsidError::TooMany {
                got: usids.len(),
                max: format.capacity(),
            });
        }
        let mut bits = u128::from(block) & format.block_mask();
        for (i, usid) in usids.iter().enumerate() {
            if usid.0 == 0 {
                return Err(UsidError::Zero);
            }
            if u128::from(usid.0) > format.usid_mask() {
                return Err(UsidError::TooWide {
                    value: usid.0,
                    usid_bits: format.usid_bits,
                });
            }
            bits |= u128::from(usid.0) << format.slot_shift(i);
        }
        Ok(Self { bits, format })
    }

    /// Read any address as a container of `format`.
    pub fn from_addr(format: UsidFormat, addr: Ipv6Addr) -> Self {
        Self {
            bits: u128::from(addr),
            format,
        }
    }

    /// The address.
    pub fn addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.bits)
    }

    /// The format.
    pub fn format(&self) -> UsidFormat {
        self.format
    }

    /// The locator block (the rest of the address zeroed).
    pub fn block(&self) -> Ipv6Addr {
        self.format.block_of(self.addr())
    }

    fn slot(&self, i: usize) -> u32 {
        ((self.bits >> self.format.slot_shift(i)) & self.format.usid_mask()) as u32
    }

    /// The active uSID (right after the block), or `None` if it is End-of-Container (0).
    pub fn active(&self) -> Option<Usid> {
        match self.slot(0) {
            0 => None,
            v => Some(Usid(v)),
        }
    }

    /// The argument: the bits after the active uSID (RFC 9800 §4.1 "DA.Argument").
    fn argument(&self) -> u128 {
        let shift = self.format.slot_shift(0);
        if shift == 0 {
            0
        } else {
            self.bits & ((1u128 << shift) - 1)
        }
    }

    /// True when no uSID follows the active one (the argument is zero, End-of-Container): a uN
    /// node whose uSID is active cannot shift and falls back to End (RFC 9800 §4.1).
    pub fn is_exhausted(&self) -> bool {
        self.argument() == 0
    }

    /// Shift as a uN node does (RFC 9800 §4.1 pseudo-code): copy the argument into the bits
    /// right after the block and zero-fill the end. Returns `false` (and changes nothing) when
    /// the container is exhausted.
    pub fn shift(&mut self) -> bool {
        let argument = self.argument();
        if argument == 0 {
            return false;
        }
        let block = self.bits & self.format.block_mask();
        // The argument moves up by one uSID; bits that would cross into the block cannot exist
        // because the argument sits below the active slot.
        self.bits = block | (argument << self.format.usid_bits);
        true
    }

    /// The uSIDs still to consume, active first, up to End-of-Container. No allocation.
    pub fn remaining(&self) -> impl Iterator<Item = Usid> + '_ {
        (0..self.format.capacity())
            .map(|i| self.slot(i))
            .take_while(|&v| v != 0)
            .map(Usid)
    }

    /// True when the address matches `block : usid` on the first B + N bits, i.e. the node
    /// owning `usid` in `block` is the active node.
    pub fn is_active(&self, block: Ipv6Addr, usid: Usid) -> bool {
        let len = u32::from(self.format.locator_len());
        let mask = if len == 0 { 0 } else { !0u128 << (128 - len) };
        self.bits & mask == u128::from(self.format.locator(block, usid)) & mask
    }
}

impl fmt::Display for UsidContainer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} [", self.block(), self.format.block_bits)?;
        for (i, usid) in self.remaining().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{usid}")?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn addr(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// RFC 9800 F3216 layout typed in by hand: block fcbb:bb00 then uSIDs 1000 2001 1001 8003
    /// and End-of-Container.
    const VECTOR: [u8; 16] = [
        0xfc, 0xbb, 0xbb, 0x00, 0x10, 0x00, 0x20, 0x01, 0x10, 0x01, 0x80, 0x03, 0, 0, 0, 0,
    ];

    #[test]
    fn builds_and_reads_the_hand_written_vector() {
        let f = UsidFormat::F3216;
        let block = addr("fcbb:bb00::");
        let path = [Usid(0x1000), Usid(0x2001), Usid(0x1001), Usid(0x8003)];
        let c = UsidContainer::new(f, block, &path).unwrap();
        assert_eq!(c.addr().octets(), VECTOR);
        let c = UsidContainer::from_addr(f, Ipv6Addr::from(VECTOR));
        assert_eq!(c.block(), block);
        assert_eq!(c.active(), Some(Usid(0x1000)));
        assert!(c.remaining().eq(path));
        assert!(c.is_active(block, Usid(0x1000)));
        assert!(!c.is_active(block, Usid(0x2001)));
        assert!(!c.is_active(addr("fcbb:bb01::"), Usid(0x1000)));
        assert_eq!(c.to_string(), "fcbb:bb00::/32 [1000 2001 1001 8003]");
    }

    #[test]
    fn shifts_like_a_un_switch_until_exhausted() {
        let f = UsidFormat::F3216;
        let mut c = UsidContainer::from_addr(f, Ipv6Addr::from(VECTOR));
        let seen: Vec<Ipv6Addr> = core::iter::from_fn(|| c.shift().then(|| c.addr())).collect();
        assert_eq!(
            seen,
            [
                addr("fcbb:bb00:2001:1001:8003::"),
                addr("fcbb:bb00:1001:8003::"),
                addr("fcbb:bb00:8003::"),
            ]
        );
        assert!(c.is_exhausted());
        assert_eq!(c.active(), Some(Usid(0x8003)));
        assert!(!c.shift(), "an exhausted container does not shift");
        assert_eq!(c.addr(), addr("fcbb:bb00:8003::"));
    }

    #[test]
    fn full_container_shifts_zero_into_the_last_slot() {
        let f = UsidFormat::F3216;
        let usids: Vec<Usid> = (1..=6).map(Usid).collect();
        let mut c = UsidContainer::new(f, addr("fcbb:bb00::"), &usids).unwrap();
        assert_eq!(c.addr(), addr("fcbb:bb00:1:2:3:4:5:6"));
        assert!(c.shift());
        assert_eq!(c.addr(), addr("fcbb:bb00:2:3:4:5:6:0"));
        assert_eq!(c.remaining().count(), 5);
    }

    #[test]
    fn construction_errors_say_what_is_wrong() {
        let f = UsidFormat::F3216;
        let b = addr("fcbb:bb00::");
        let seven: Vec<Usid> = (1..=7).map(Usid).collect();
        assert_eq!(
            UsidContainer::new(f, b, &seven),
            Err(UsidError::TooMany { got: 7, max: 6 })
        );
        assert_eq!(
            UsidContainer::new(f, b, &[Usid(0x1_0000)]),
            Err(UsidError::TooWide {
                value: 0x1_0000,
                usid_bits: 16
            })
        );
        assert_eq!(UsidContainer::new(f, b, &[Usid(0)]), Err(UsidError::Zero));
        assert!(UsidFormat::new(120, 16).is_err());
        assert!(UsidFormat::new(32, 4).is_err());
    }

    #[test]
    fn other_formats_work_too() {
        // F4816: 48-bit block, five 16-bit uSIDs.
        let f = UsidFormat::new(48, 16).unwrap();
        assert_eq!(f.capacity(), 5);
        assert_eq!(f.locator_len(), 64);
        let mut c = UsidContainer::new(f, addr("2001:db8:1::"), &[Usid(7), Usid(9)]).unwrap();
        assert_eq!(c.addr(), addr("2001:db8:1:7:9::"));
        assert!(c.shift());
        assert_eq!(c.addr(), addr("2001:db8:1:9::"));
        // F3232: 32-bit uSIDs, three per address.
        let f = UsidFormat::new(32, 32).unwrap();
        let c = UsidContainer::new(f, addr("fcbb::"), &[Usid(0xdead_beef)]).unwrap();
        assert_eq!(c.addr(), addr("fcbb:0:dead:beef::"));
    }

    proptest! {
        #[test]
        fn shift_matches_the_rfc_byte_copy(raw in any::<[u8; 16]>()) {
            // RFC 9800 §4.1 written over bytes for F3216: copy DA[6..16] to DA[4..14], zero 14..16.
            let mut c = UsidContainer::from_addr(UsidFormat::F3216, Ipv6Addr::from(raw));
            let argument_zero = raw[6..].iter().all(|&b| b == 0);
            prop_assert_eq!(c.is_exhausted(), argument_zero);
            let shifted = c.shift();
            prop_assert_eq!(shifted, !argument_zero);
            let mut expect = raw;
            if shifted {
                expect.copy_within(6..16, 4);
                expect[14] = 0;
                expect[15] = 0;
            }
            prop_assert_eq!(c.addr().octets(), expect);
        }

        #[test]
        fn build_then_read_back(usids in prop::collection::vec(1u32..=0xffff, 0..=6), block in any::<[u8; 16]>()) {
            let usids: Vec<Usid> = usids.into_iter().map(Usid).collect();
            let f = UsidFormat::F3216;
            let c = UsidContainer::new(f, Ipv6Addr::from(block), &usids).unwrap();
            prop_assert!(c.remaining().eq(usids.iter().copied()));
            prop_assert_eq!(&c.block().octets()[..4], &block[..4]);
            prop_assert_eq!(UsidContainer::from_addr(f, c.addr()), c);
        }
    }
}
