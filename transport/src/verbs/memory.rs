//! Registered memory behind a trait, so the simulator can own plain buffers while the NIC
//! runtime shares application memory across threads (`nic::memory`: every byte accessed as a
//! relaxed atomic, copied at memcpy speed by the one fenced module `nic/src/memory/racy.rs`;
//! no `unsafe` in the engine).

use crate::wire::icrc::Running;

/// The bytes of one memory region.
///
/// The engine checks every range against [`len`](Memory::len) before calling
/// [`read`](Memory::read) or [`write`](Memory::write); implementations may panic on a range
/// outside `0..len()` because the engine never asks for one.
pub trait Memory: Send {
    /// Size of the region in bytes.
    fn len(&self) -> usize;

    /// `true` for a zero-length region.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copy `dst.len()` bytes starting at `offset` into `dst`.
    fn read(&self, offset: usize, dst: &mut [u8]);

    /// Copy `src` into the region starting at `offset`.
    fn write(&mut self, offset: usize, src: &[u8]);

    /// [`read`](Memory::read), and run the ICRC over the bytes read: a sender gathers payload
    /// into its frame and checksums it in one pass where the memory allows (issue #13). The
    /// default reads, then checksums `dst`.
    fn read_crc(&self, offset: usize, dst: &mut [u8], crc: &mut Running<'_>) {
        self.read(offset, dst);
        crc.update(dst);
    }

    /// The whole region as a slice, when the memory can lend one (plain buffers can; memory
    /// shared with another thread cannot).
    fn as_slice(&self) -> Option<&[u8]> {
        None
    }
}

impl Memory for Vec<u8> {
    fn len(&self) -> usize {
        self.as_slice().len()
    }
    fn read(&self, offset: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&self[offset..offset + dst.len()]);
    }
    fn write(&mut self, offset: usize, src: &[u8]) {
        self[offset..offset + src.len()].copy_from_slice(src);
    }
    fn read_crc(&self, offset: usize, dst: &mut [u8], crc: &mut Running<'_>) {
        crc.update_copy(dst, &self[offset..offset + dst.len()]);
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl Memory for Box<[u8]> {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
    fn read(&self, offset: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&self[offset..offset + dst.len()]);
    }
    fn write(&mut self, offset: usize, src: &[u8]) {
        self[offset..offset + src.len()].copy_from_slice(src);
    }
    fn read_crc(&self, offset: usize, dst: &mut [u8], crc: &mut Running<'_>) {
        crc.update_copy(dst, &self[offset..offset + dst.len()]);
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vec_and_boxed_slice_read_back_what_was_written() {
        let mut regions: [Box<dyn Memory>; 2] = [
            Box::new(vec![0u8; 16]),
            Box::new(vec![0u8; 16].into_boxed_slice()),
        ];
        for m in &mut regions {
            m.write(3, b"abc");
            let mut out = [0u8; 5];
            m.read(2, &mut out);
            assert_eq!(&out, b"\0abc\0");
            assert_eq!(m.len(), 16);
            assert!(!m.is_empty());
            assert_eq!(&m.as_slice().unwrap()[3..6], b"abc");
        }
    }
}
