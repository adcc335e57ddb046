//! A binary min-heap of events keyed by `(time, seq)`, for the simulators' event queues.
//!
//! The keys are unique (`seq` counts the events scheduled), so every correct priority queue pops
//! the events in the same order; this one only does it with fewer memory round trips than
//! `std::collections::BinaryHeap`. Std's heap moves an element into its slot and then reads it
//! back to sift it ([`std::collections::binary_heap::PeekMut`] writes the new top, its drop reads
//! it again): the read follows the write so closely that the CPU has to forward the stored
//! bytes to it, which it cannot do when the store and the load split the entry differently
//! (the enum's tag and field are two 4-byte stores, read as one 16-byte load), and every such
//! load waits for the store to reach the cache. In `perf` these loads were about a fifth of
//! `Net::forward` and of the event loop. Here the entry being placed stays in registers while
//! the others move, and is written once, where it ends up.

/// An event `ev` due at `(time, seq)`.
#[derive(Clone, Copy, Debug)]
pub struct Keyed<T> {
    pub time: u64,
    pub seq: u64,
    pub ev: T,
}

impl<T> Keyed<T> {
    #[inline]
    pub fn key(&self) -> (u64, u64) {
        (self.time, self.seq)
    }
}

/// A min-heap of [`Keyed`] events: the earliest `(time, seq)` first.
#[derive(Clone, Debug)]
pub struct EventHeap<T> {
    v: Vec<Keyed<T>>,
}

impl<T: Copy> EventHeap<T> {
    pub fn with_capacity(n: usize) -> EventHeap<T> {
        EventHeap { v: Vec::with_capacity(n) }
    }

    pub fn len(&self) -> usize {
        self.v.len()
    }

    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    /// The earliest event.
    #[inline]
    pub fn peek(&self) -> Option<&Keyed<T>> {
        self.v.first()
    }

    /// The key of the earliest event.
    #[inline]
    pub fn peek_key(&self) -> Option<(u64, u64)> {
        self.v.first().map(Keyed::key)
    }

    #[inline(always)]
    pub fn push(&mut self, e: Keyed<T>) {
        let mut i = self.v.len();
        self.v.push(e);
        // Sift up: parents later than `e` move down into the hole.
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.v[parent].key() <= e.key() {
                break;
            }
            self.v[i] = self.v[parent];
            i = parent;
        }
        self.v[i] = e;
    }

    /// Removes and returns the earliest event.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<Keyed<T>> {
        let last = self.v.pop()?;
        if self.v.is_empty() {
            return Some(last);
        }
        Some(self.replace_top(last))
    }

    /// Replaces the earliest event by `e` (cheaper than a pop and a push) and returns it.
    /// The heap must not be empty.
    #[inline(always)]
    pub fn replace_top(&mut self, e: Keyed<T>) -> Keyed<T> {
        let top = self.v[0];
        let n = self.v.len();
        let mut i = 0;
        // Sift down: the earlier child moves up into the hole while it is earlier than `e`.
        loop {
            let mut child = 2 * i + 1;
            if child >= n {
                break;
            }
            if child + 1 < n && self.v[child + 1].key() < self.v[child].key() {
                child += 1;
            }
            if e.key() <= self.v[child].key() {
                break;
            }
            self.v[i] = self.v[child];
            i = child;
        }
        self.v[i] = e;
        top
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_core::rng::Rng;

    #[test]
    fn events_come_out_in_key_order_whatever_the_operations() {
        let mut rng = Rng::new(5);
        let mut heap = EventHeap::with_capacity(4);
        let mut reference = std::collections::BTreeSet::new();
        let mut seq = 0;
        let mut out = Vec::new();
        let mut expected = Vec::new();
        for _ in 0..20_000 {
            let time = (rng.uniform() * 50.0) as u64;
            match (rng.uniform() * 3.0) as u32 {
                0 if !heap.is_empty() => {
                    let e: Keyed<u64> = heap.pop().unwrap();
                    out.push(e.key());
                    expected.push(reference.pop_first().unwrap());
                }
                1 if !heap.is_empty() => {
                    let e = heap.replace_top(Keyed { time, seq, ev: seq });
                    out.push(e.key());
                    expected.push(reference.pop_first().unwrap());
                    reference.insert((time, seq));
                    seq += 1;
                }
                _ => {
                    heap.push(Keyed { time, seq, ev: seq });
                    reference.insert((time, seq));
                    seq += 1;
                }
            }
            assert_eq!(heap.len(), reference.len());
            assert_eq!(heap.peek_key(), reference.first().copied());
        }
        while let Some(e) = heap.pop() {
            assert_eq!(e.ev, e.seq, "an entry keeps its event");
            out.push(e.key());
            expected.push(reference.pop_first().unwrap());
        }
        assert_eq!(out, expected);
        assert!(out.len() > 10_000);
    }
}
