//! The links' share of a simulator's event order: lanes of pending arrivals and the free events
//! of links with packets waiting, in a heap of their own (see [`crate::net`]'s "Hot path" for
//! why). Both simulators ([`crate::net::Net`] and the overlay's [`crate::overlay::engine`])
//! keep their links' events here and their endpoints' events in a second [`EventHeap`]; they
//! take the earlier of the two heaps' first entries ([`earlier`]), so events run in the order
//! of their `(time, seq)` keys, exactly as one heap of every event would run them.

use std::collections::VecDeque;

use crate::event_heap::{EventHeap, Keyed};

/// What an entry of the links' heap stands for: the first pending arrival of link `i`'s lane,
/// or link `i`'s free event while packets wait behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireEvent {
    Arrival(u32),
    Free(u32),
}

/// Pending arrivals per link (`(time, seq, item)` in increasing key order, the first one also in
/// the heap) and the free events of busy links with packets waiting.
#[derive(Clone, Debug)]
pub struct Wire<T> {
    heap: EventHeap<WireEvent>,
    lanes: Vec<VecDeque<(u64, u64, T)>>,
}

/// The earlier of the links' first key `wire` and the endpoints' first key `endpoints` (keys are
/// unique), with whether it is the links'; `None` when both heaps are empty.
#[inline]
pub fn earlier(wire: Option<(u64, u64)>, endpoints: Option<(u64, u64)>) -> Option<((u64, u64), bool)> {
    match (wire, endpoints) {
        (Some(w), Some(e)) => Some((w.min(e), w < e)),
        (Some(w), None) => Some((w, true)),
        (None, e) => e.map(|e| (e, false)),
    }
}

impl<T> Wire<T> {
    pub fn new(links: usize) -> Wire<T> {
        Wire { heap: EventHeap::with_capacity(2 * links), lanes: (0..links).map(|_| VecDeque::new()).collect() }
    }

    /// The key of the links' first event.
    #[inline]
    pub fn peek_key(&self) -> Option<(u64, u64)> {
        self.heap.peek_key()
    }

    /// The links' first event.
    #[inline]
    pub fn peek(&self) -> Option<WireEvent> {
        self.heap.peek().map(|k| k.ev)
    }

    /// Puts `item`'s arrival over link `li` at `(time, seq)` in the link's lane, or gives it back
    /// when that would not keep the lane in order (a time earlier than the lane's last one:
    /// only a link whose delay changed; `seq` is always the largest yet).
    #[inline]
    pub fn push_arrival(&mut self, li: u32, time: u64, seq: u64, item: T) -> Result<(), T> {
        let lane = &mut self.lanes[li as usize];
        match lane.back() {
            None => {
                lane.push_back((time, seq, item));
                self.heap.push(Keyed { time, seq, ev: WireEvent::Arrival(li) });
                Ok(())
            }
            Some(&(last, _, _)) if time >= last => {
                lane.push_back((time, seq, item));
                Ok(())
            }
            Some(_) => Err(item),
        }
    }

    /// Takes the first arrival of link `li`'s lane, the links' first event
    /// ([`WireEvent::Arrival`]`(li)` on top); the lane's next arrival takes its place in the
    /// heap (one sift-down).
    #[inline]
    pub fn pop_arrival(&mut self, li: u32) -> Option<T> {
        let lane = &mut self.lanes[li as usize];
        let (_, _, item) = lane.pop_front()?;
        match lane.front() {
            Some(&(time, seq, _)) => {
                self.heap.replace_top(Keyed { time, seq, ev: WireEvent::Arrival(li) });
            }
            None => {
                self.heap.pop();
            }
        }
        Some(item)
    }

    /// Link `li`'s free event at `(time, seq)` enters: its first packet started waiting.
    #[inline]
    pub fn push_free(&mut self, li: u32, (time, seq): (u64, u64)) {
        self.heap.push(Keyed { time, seq, ev: WireEvent::Free(li) });
    }

    /// The free event on top ([`WireEvent::Free`]`(li)`) has started the next transmission:
    /// that transmission's free event `next` takes its place while packets still wait, else it
    /// leaves.
    #[inline]
    pub fn replace_free(&mut self, li: u32, next: Option<(u64, u64)>) {
        match next {
            Some((time, seq)) => {
                self.heap.replace_top(Keyed { time, seq, ev: WireEvent::Free(li) });
            }
            None => {
                self.heap.pop();
            }
        }
    }

    /// Removes the entry on top (a lane or free event with nothing behind it: not reached while
    /// the owner keeps its links consistent).
    pub fn discard_top(&mut self) {
        self.heap.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earlier_takes_the_smaller_key_and_says_whose() {
        assert_eq!(earlier(Some((5, 1)), Some((5, 2))), Some(((5, 1), true)));
        assert_eq!(earlier(Some((6, 0)), Some((5, 9))), Some(((5, 9), false)));
        assert_eq!(earlier(None, Some((1, 1))), Some(((1, 1), false)));
        assert_eq!(earlier(Some((1, 1)), None), Some(((1, 1), true)));
        assert_eq!(earlier(None, None), None);
    }

    #[test]
    fn lanes_release_arrivals_in_key_order_and_refuse_one_out_of_order() {
        let mut w: Wire<char> = Wire::new(2);
        w.push_arrival(0, 10, 1, 'a').unwrap();
        w.push_arrival(1, 7, 2, 'b').unwrap();
        w.push_arrival(0, 12, 3, 'c').unwrap();
        assert_eq!(w.push_arrival(0, 11, 4, 'x'), Err('x'), "earlier than the lane's last");
        w.push_free(1, (8, 5));
        let mut order = Vec::new();
        while let Some(ev) = w.peek() {
            let key = w.peek_key().unwrap();
            match ev {
                WireEvent::Arrival(li) => order.push((key, w.pop_arrival(li).unwrap())),
                WireEvent::Free(li) => {
                    order.push((key, 'F'));
                    w.replace_free(li, None);
                }
            }
        }
        assert_eq!(order, vec![((7, 2), 'b'), ((8, 5), 'F'), ((10, 1), 'a'), ((12, 3), 'c')]);
    }

    #[test]
    fn a_free_event_replaced_moves_to_its_next_key() {
        let mut w: Wire<u8> = Wire::new(1);
        w.push_free(0, (5, 1));
        w.push_arrival(0, 6, 2, 9).unwrap();
        assert_eq!(w.peek(), Some(WireEvent::Free(0)));
        w.replace_free(0, Some((7, 3)));
        assert_eq!((w.peek(), w.peek_key()), (Some(WireEvent::Arrival(0)), Some((6, 2))));
        assert_eq!(w.pop_arrival(0), Some(9));
        assert_eq!((w.peek(), w.peek_key()), (Some(WireEvent::Free(0)), Some((7, 3))));
    }
}
