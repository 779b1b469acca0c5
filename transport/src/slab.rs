//! A bounded slab whose keys carry an index and a generation, so a stale or forged key never
//! reaches a reused slot. QPs, MRs, CQs and PDs live in these: lookups are an index and a
//! compare, never a hash (docs/ARCHITECTURE.md, hot path).

/// A slot table of at most `limit` entries. Keys are `generation << index_bits | index`.
#[derive(Debug)]
pub struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    limit: usize,
    index_bits: u32,
    generation_mask: u32,
    live: usize,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

impl<T> Slab<T> {
    /// A slab of at most `limit` entries whose keys are `index_bits + generation_bits` wide.
    /// Generations start at 1, so no key is ever below `1 << index_bits`.
    pub fn new(limit: usize, index_bits: u32, generation_bits: u32) -> Self {
        assert!(
            index_bits + generation_bits <= 32,
            "keys must fit in 32 bits"
        );
        assert!(
            limit <= 1usize << index_bits,
            "limit exceeds the index space"
        );
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            limit,
            index_bits,
            generation_mask: (1u32 << generation_bits) - 1,
            live: 0,
        }
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Store `value`, returning its key, or give it back if the slab is full.
    pub fn insert(&mut self, value: T) -> Result<u32, T> {
        let index = if let Some(index) = self.free.pop() {
            index
        } else if self.slots.len() < self.limit {
            self.slots.push(Slot {
                generation: 0,
                value: None,
            });
            (self.slots.len() - 1) as u32
        } else {
            return Err(value);
        };
        let slot = &mut self.slots[index as usize];
        // Generations cycle through 1..=mask; 0 is never used so no key is below 1 << bits.
        slot.generation = if slot.generation >= self.generation_mask {
            1
        } else {
            slot.generation + 1
        };
        slot.value = Some(value);
        self.live += 1;
        Ok(slot.generation << self.index_bits | index)
    }

    /// The slot index a live key points at.
    pub fn index_of(&self, key: u32) -> Option<usize> {
        let index = (key & ((1u32 << self.index_bits) - 1)) as usize;
        let generation = key >> self.index_bits;
        let slot = self.slots.get(index)?;
        (slot.generation == generation && slot.value.is_some()).then_some(index)
    }

    pub fn get(&self, key: u32) -> Option<&T> {
        let index = self.index_of(key)?;
        self.slots[index].value.as_ref()
    }

    pub fn get_mut(&mut self, key: u32) -> Option<&mut T> {
        let index = self.index_of(key)?;
        self.slots[index].value.as_mut()
    }

    /// The entry at a slot index (for tables that remember indices, not keys).
    pub fn at(&self, index: usize) -> Option<&T> {
        self.slots.get(index)?.value.as_ref()
    }

    pub fn at_mut(&mut self, index: usize) -> Option<&mut T> {
        self.slots.get_mut(index)?.value.as_mut()
    }

    /// Remove and return the entry a key points at.
    pub fn remove(&mut self, key: u32) -> Option<T> {
        let index = self.index_of(key)?;
        let value = self.slots[index].value.take();
        self.free.push(index as u32);
        self.live -= 1;
        value
    }

    /// Live entries with their slot indices.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.value.as_ref().map(|v| (i, v)))
    }

    /// Number of slots ever allocated (live or free): the bound on slot indices.
    pub fn capacity_used(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_keys_miss_reused_slots() {
        let mut s = Slab::new(2, 4, 4);
        let a = s.insert("a").unwrap();
        let b = s.insert("b").unwrap();
        assert!(s.insert("c").is_err(), "limit holds");
        assert_eq!(s.remove(a), Some("a"));
        let c = s.insert("c").unwrap();
        assert_ne!(a, c, "same slot, new generation");
        assert_eq!(s.get(a), None);
        assert_eq!(s.get(c), Some(&"c"));
        assert_eq!(s.get(b), Some(&"b"));
        assert!(a >= 1 << 4 && c >= 1 << 4, "generation 0 is never used");
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn generations_wrap_without_zero() {
        let mut s = Slab::new(1, 1, 2);
        let mut keys = Vec::new();
        for _ in 0..7 {
            let k = s.insert(()).unwrap();
            keys.push(k >> 1);
            s.remove(k);
        }
        assert_eq!(keys, [1, 2, 3, 1, 2, 3, 1]);
    }

    #[test]
    fn forged_keys_miss() {
        let mut s: Slab<u8> = Slab::new(4, 8, 8);
        let k = s.insert(1).unwrap();
        for forged in [0u32, 1, k ^ 0x100, k + 1, u32::MAX] {
            assert_eq!(s.get(forged), None, "{forged:#x}");
        }
    }
}
