//! Memory regions: registration with access flags and keys, and the bounds/access/PD checks
//! every local gather (lkey) and remote placement (rkey) goes through.

use core::fmt;

use super::{Access, Memory, PdHandle, VerbsError};
use crate::slab::Slab;
use crate::wire::icrc::Running;

/// Keys of a registered region. The lkey names it in local scatter/gather entries, the rkey in
/// a peer's RETH. Both carry a slot index and a generation, so a deregistered region's keys
/// stop working at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MrKeys {
    pub lkey: u32,
    pub rkey: u32,
}

/// A registered region: its memory, the I/O virtual address its first byte answers to (the VA
/// a RETH names), its protection domain and access rights.
pub(crate) struct Mr {
    pub pd: PdHandle,
    pub iova: u64,
    pub access: Access,
    pub memory: Box<dyn Memory>,
    /// `memory.len()` at registration (a region never changes length): every gather and
    /// placement checks its bounds against it without a virtual call (issue #13).
    pub len: u64,
}

impl fmt::Debug for Mr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mr")
            .field("pd", &self.pd)
            .field("iova", &format_args!("{:#x}", self.iova))
            .field("len", &self.memory.len())
            .field("access", &self.access)
            .finish()
    }
}

impl Mr {
    /// The offset of `va..va + len` inside the region, if the whole range lies in it
    /// (u64 overflow included).
    pub fn offset_of(&self, va: u64, len: u64) -> Option<usize> {
        let offset = va.checked_sub(self.iova)?;
        let end = offset.checked_add(len)?;
        (end <= self.len).then_some(offset as usize)
    }
}

/// Why a remote write was refused (each is its own drop counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RemoteAccessError {
    /// No region with this rkey (or a stale one), or a region of another protection domain.
    BadRkey,
    /// The range is not inside the region.
    OutOfBounds,
    /// The region was not registered with remote write access.
    NoAccess,
}

/// Every registered region of an endpoint.
#[derive(Debug)]
pub(crate) struct MrTable {
    slab: Slab<Mr>,
    /// XORed into the generation half of rkeys so that rkeys are not guessable from lkeys.
    rkey_salt: u32,
}

const INDEX_BITS: u32 = 16;

impl MrTable {
    pub fn new(limit: usize, salt: u32) -> Self {
        Self {
            slab: Slab::new(limit.min(1 << INDEX_BITS), INDEX_BITS, 32 - INDEX_BITS),
            rkey_salt: salt & !((1 << INDEX_BITS) - 1),
        }
    }

    /// Register a region. Remote write requires local write, as in libibverbs.
    pub fn register(
        &mut self,
        pd: PdHandle,
        iova: u64,
        memory: Box<dyn Memory>,
        access: Access,
    ) -> Result<MrKeys, VerbsError> {
        if access.contains(Access::REMOTE_WRITE) && !access.contains(Access::LOCAL_WRITE) {
            return Err(VerbsError::InvalidAccess);
        }
        if iova.checked_add(memory.len() as u64).is_none() {
            return Err(VerbsError::AddressOverflow);
        }
        let len = memory.len() as u64;
        let lkey = self
            .slab
            .insert(Mr {
                pd,
                iova,
                access,
                memory,
                len,
            })
            .map_err(|_| VerbsError::LimitReached {
                what: "memory regions",
            })?;
        Ok(MrKeys {
            lkey,
            rkey: lkey ^ self.rkey_salt,
        })
    }

    /// Deregister by lkey, returning the memory.
    pub fn deregister(&mut self, lkey: u32) -> Result<Box<dyn Memory>, VerbsError> {
        self.slab
            .remove(lkey)
            .map(|mr| mr.memory)
            .ok_or(VerbsError::InvalidLkey(lkey))
    }

    pub fn by_lkey(&self, lkey: u32) -> Option<&Mr> {
        self.slab.get(lkey)
    }

    pub fn by_lkey_mut(&mut self, lkey: u32) -> Option<&mut Mr> {
        self.slab.get_mut(lkey)
    }

    /// Whether any region belongs to `pd` (a PD in use cannot be freed).
    pub fn uses_pd(&self, pd: PdHandle) -> bool {
        self.slab.iter().any(|(_, mr)| mr.pd == pd)
    }

    /// The slot index of the region a local `sge` range names, after the PD and bounds checks.
    pub fn check_local(
        &self,
        pd: PdHandle,
        lkey: u32,
        va: u64,
        len: u64,
    ) -> Result<(), VerbsError> {
        let mr = self.slab.get(lkey).ok_or(VerbsError::InvalidLkey(lkey))?;
        if mr.pd != pd {
            return Err(VerbsError::WrongPd);
        }
        mr.offset_of(va, len)
            .map(|_| ())
            .ok_or(VerbsError::OutOfBounds)
    }

    /// Read `dst.len()` bytes at `va` from the region `lkey` names. Bounds were checked when the
    /// work request was posted, but the region may have been deregistered since.
    pub fn read_local(&self, lkey: u32, va: u64, dst: &mut [u8]) -> Result<(), VerbsError> {
        let (mr, offset) = self.local(lkey, va, dst.len())?;
        mr.memory.read(offset, dst);
        Ok(())
    }

    /// [`read_local`](Self::read_local), running the ICRC `crc` over the bytes read (one pass
    /// where the memory allows).
    pub fn read_local_crc(
        &self,
        lkey: u32,
        va: u64,
        dst: &mut [u8],
        crc: &mut Running<'_>,
    ) -> Result<(), VerbsError> {
        let (mr, offset) = self.local(lkey, va, dst.len())?;
        mr.memory.read_crc(offset, dst, crc);
        Ok(())
    }

    /// The region `lkey` names and the offset of `va` in it, if `len` bytes fit there.
    fn local(&self, lkey: u32, va: u64, len: usize) -> Result<(&Mr, usize), VerbsError> {
        let mr = self.slab.get(lkey).ok_or(VerbsError::InvalidLkey(lkey))?;
        let offset = mr
            .offset_of(va, len as u64)
            .ok_or(VerbsError::OutOfBounds)?;
        Ok((mr, offset))
    }

    /// Place `src` at `va` in the region a peer's `rkey` names, if `pd` owns it, the range fits
    /// and remote write is allowed (MRC 1.0 §7, brief §4.1: R_Key/bounds check before DMA).
    pub fn write_remote(
        &mut self,
        pd: PdHandle,
        rkey: u32,
        va: u64,
        src: &[u8],
    ) -> Result<(), RemoteAccessError> {
        let mr = self.check_remote(pd, rkey, va, src.len() as u64)?;
        let offset = mr
            .offset_of(va, src.len() as u64)
            .ok_or(RemoteAccessError::OutOfBounds)?;
        mr.memory.write(offset, src);
        Ok(())
    }

    /// The checks of [`write_remote`](Self::write_remote) without writing.
    pub fn check_remote(
        &mut self,
        pd: PdHandle,
        rkey: u32,
        va: u64,
        len: u64,
    ) -> Result<&mut Mr, RemoteAccessError> {
        let mr = self
            .slab
            .get_mut(rkey ^ self.rkey_salt)
            .ok_or(RemoteAccessError::BadRkey)?;
        if mr.pd != pd {
            return Err(RemoteAccessError::BadRkey);
        }
        if mr.offset_of(va, len).is_none() {
            return Err(RemoteAccessError::OutOfBounds);
        }
        if !mr.access.contains(Access::REMOTE_WRITE) {
            return Err(RemoteAccessError::NoAccess);
        }
        Ok(mr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PD: PdHandle = PdHandle(0x11);
    const OTHER_PD: PdHandle = PdHandle(0x12);

    fn table() -> (MrTable, MrKeys) {
        let mut t = MrTable::new(4, 0xdead_beef);
        let keys = t
            .register(
                PD,
                0x1000,
                Box::new(vec![0u8; 64]),
                Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            )
            .unwrap();
        (t, keys)
    }

    #[test]
    fn remote_write_lands_at_va_minus_iova() {
        let (mut t, k) = table();
        assert_ne!(k.lkey, k.rkey);
        t.write_remote(PD, k.rkey, 0x1010, b"xyz").unwrap();
        let mut out = [0u8; 3];
        t.read_local(k.lkey, 0x1010, &mut out).unwrap();
        assert_eq!(&out, b"xyz");
    }

    #[test]
    fn remote_checks_refuse_bad_keys_ranges_pds_and_rights() {
        let (mut t, k) = table();
        let ro = t
            .register(PD, 0, Box::new(vec![0u8; 8]), Access::LOCAL_WRITE)
            .unwrap();
        let cases = [
            (PD, k.lkey, 0x1000, 1, RemoteAccessError::BadRkey),
            (PD, k.rkey ^ 0x1_0000, 0x1000, 1, RemoteAccessError::BadRkey),
            (OTHER_PD, k.rkey, 0x1000, 1, RemoteAccessError::BadRkey),
            (PD, k.rkey, 0xfff, 1, RemoteAccessError::OutOfBounds),
            (PD, k.rkey, 0x1000, 65, RemoteAccessError::OutOfBounds),
            (PD, k.rkey, u64::MAX, 2, RemoteAccessError::OutOfBounds),
            (PD, ro.rkey, 0, 1, RemoteAccessError::NoAccess),
        ];
        for (pd, rkey, va, len, want) in cases {
            assert_eq!(
                t.check_remote(pd, rkey, va, len).err(),
                Some(want),
                "{rkey:#x} {va:#x}+{len}"
            );
        }
    }

    #[test]
    fn registration_rules() {
        let mut t = MrTable::new(1, 0);
        assert_eq!(
            t.register(PD, 0, Box::new(vec![0u8; 1]), Access::REMOTE_WRITE),
            Err(VerbsError::InvalidAccess)
        );
        assert_eq!(
            t.register(PD, u64::MAX, Box::new(vec![0u8; 2]), Access::LOCAL_WRITE),
            Err(VerbsError::AddressOverflow)
        );
        let k = t
            .register(PD, 0, Box::new(vec![0u8; 1]), Access::LOCAL_WRITE)
            .unwrap();
        assert!(matches!(
            t.register(PD, 0, Box::new(vec![0u8; 1]), Access::LOCAL_WRITE),
            Err(VerbsError::LimitReached { .. })
        ));
        assert!(t.uses_pd(PD));
        t.deregister(k.lkey).unwrap();
        assert!(!t.uses_pd(PD));
        assert_eq!(
            t.read_local(k.lkey, 0, &mut [0]),
            Err(VerbsError::InvalidLkey(k.lkey))
        );
    }
}
