//! Frame buffers, recycled: a frame is a `u32` handle into the pool; buffers freed by a drop,
//! a trim or a delivery go back on the free list, so a run in steady state allocates nothing
//! per packet.

/// A frame in the pool.
pub type PacketId = u32;

/// The pool of frame buffers, each `frame_cap` bytes.
#[derive(Debug)]
pub struct Pool {
    frame_cap: usize,
    bufs: Vec<Box<[u8]>>,
    lens: Vec<u32>,
    free: Vec<PacketId>,
    live: usize,
    peak: usize,
}

impl Pool {
    /// An empty pool of buffers of `frame_cap` bytes.
    pub fn new(frame_cap: usize) -> Self {
        Self {
            frame_cap,
            bufs: Vec::new(),
            lens: Vec::new(),
            free: Vec::new(),
            live: 0,
            peak: 0,
        }
    }

    /// A buffer of `frame_cap` bytes (contents unspecified), length set to the capacity.
    pub fn alloc(&mut self) -> PacketId {
        self.live += 1;
        self.peak = self.peak.max(self.live);
        if let Some(id) = self.free.pop() {
            self.lens[id as usize] = self.frame_cap as u32;
            return id;
        }
        self.bufs.push(vec![0; self.frame_cap].into_boxed_slice());
        self.lens.push(self.frame_cap as u32);
        (self.bufs.len() - 1) as PacketId
    }

    /// Give a buffer back.
    pub fn free(&mut self, id: PacketId) {
        debug_assert!(!self.free.contains(&id), "double free of frame {id}");
        self.live -= 1;
        self.free.push(id);
    }

    /// The frame's bytes.
    pub fn frame(&self, id: PacketId) -> &[u8] {
        &self.bufs[id as usize][..self.lens[id as usize] as usize]
    }

    /// The frame's bytes, writable.
    pub fn frame_mut(&mut self, id: PacketId) -> &mut [u8] {
        &mut self.bufs[id as usize][..self.lens[id as usize] as usize]
    }

    /// The whole buffer, for a writer that sets the length afterwards.
    pub fn buffer_mut(&mut self, id: PacketId) -> &mut [u8] {
        &mut self.bufs[id as usize]
    }

    /// Frame length in bytes.
    pub fn len(&self, id: PacketId) -> usize {
        self.lens[id as usize] as usize
    }

    /// Set the frame length (`<=` the buffer's capacity): after writing, or to trim.
    pub fn set_len(&mut self, id: PacketId, len: usize) {
        assert!(
            len <= self.frame_cap,
            "frame longer than the pool's buffers"
        );
        self.lens[id as usize] = len as u32;
    }

    /// Frames in use now.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Most frames in use at once (the number of buffers ever allocated).
    pub fn peak(&self) -> usize {
        self.peak
    }

    /// Buffer capacity.
    pub fn frame_cap(&self) -> usize {
        self.frame_cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_recycled() {
        let mut p = Pool::new(64);
        let a = p.alloc();
        p.buffer_mut(a)[..3].copy_from_slice(b"abc");
        p.set_len(a, 3);
        assert_eq!(p.frame(a), b"abc");
        p.free(a);
        let b = p.alloc();
        assert_eq!(a, b, "the freed buffer is reused");
        assert_eq!(p.len(b), 64);
        let _c = p.alloc();
        assert_eq!((p.live(), p.peak()), (2, 2));
    }
}
