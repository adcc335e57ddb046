//! `headroom testbed bench-link`: does the exact link ([`crate::delaybox`]) space packets at its
//! rate? (issue 19)
//!
//! Per rate, a fresh two-host testbed whose bottleneck is an exact link of that rate (1 ms each
//! way, a 100 000-packet buffer so nothing drops). `s1` floods `packets` UDP datagrams of `size`
//! IP bytes back to back (at the veth's speed, far above the rate), `r1` receives them with kernel
//! receive timestamps (`SO_TIMESTAMPNS`, taken when the packet enters `r1`'s namespace). On an
//! exact link every gap between two consecutive arrivals is `size·8 / rate`; the check reports
//! the median and 99th percentile of |gap − size·8/rate|, the rate the receiver saw over the
//! whole flood, and the box's own drops. A rate is *sustained* when every packet arrived, the
//! box dropped none of its own, and the received rate is within 1 % of the link's.
//!
//! Two things that are not the link can spoil a flood, and both are checked (issue 19's audit,
//! session 8, measured them): arrival timestamps switched on late (the kernel flips them on
//! from a work queue: [`headroom_net::timing::ArrivalTimestamps`], held for the whole flood), and
//! an input slower than the link, which leaves it idle between bursts ([`Spacing::link_idle`]:
//! the packets that found the link idle, 1 or 2 when the flood kept it busy). The flood's sender runs
//! at real-time priority above the box's (`FLOOD_PRIORITY`) for the same reason.

use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use anyhow::{anyhow, Result};
use headroom_core::stats::Sorted;
use headroom_core::{Bytes, Dur, Rate};

use crate::bed::Testbed;
use crate::topology::{Bottleneck, Buffer, Topology};

/// IP + UDP header bytes.
const HEADERS: usize = 28;
const PORT: u16 = 6100;
/// SCHED_FIFO priority of the flood's sender: above the delay box's lines, so the input does not
/// wait for the box (the kernel then runs the box on the other core).
const FLOOD_PRIORITY: i32 = crate::delaybox::REALTIME_PRIORITY + 1;

/// What one flood through one link measured.
#[derive(Clone, Debug)]
pub struct Spacing {
    pub rate: Rate,
    pub size: usize,
    pub sent: u32,
    pub received: usize,
    /// `size·8 / rate`.
    pub ideal: Dur,
    /// Median, 90th and 99th percentile of |gap − ideal|.
    pub median_error: Dur,
    pub p90_error: Dur,
    pub p99_error: Dur,
    /// The rate over the flood at the receiver: (received − 1)·size·8 / (last − first arrival).
    pub received_rate: Rate,
    /// Drops of the delay box itself (TUN ring, overflow, write errors).
    pub own_drops: u64,
    /// The box's release lateness (write start − scheduled departure): mean and the bound of
    /// its 99th percentile. Small lateness with large gap errors means the delay came after
    /// the box (the receiving namespaces' softirq work on a loaded machine).
    pub box_late_mean: Dur,
    pub box_late_p99: Dur,
    /// Packets of the flood that found the link idle: 1 or 2 when the flood kept it busy (the
    /// sustained floods of issue 19's audit); more when the input came in slower than the rate
    /// in places (4–461 in its floods that were not sustained), so a low received rate is the
    /// input's, not the link's.
    pub link_idle: u64,
}

impl Spacing {
    /// Every packet arrived, none dropped by the box, the rate within 1 %.
    pub fn sustained(&self) -> bool {
        self.received == self.sent as usize
            && self.own_drops == 0
            && (self.received_rate.as_mbps() / self.rate.as_mbps() - 1.0).abs() <= 0.01
    }
}

/// The gap statistics of arrival times `t_ns` (in arrival order) against `ideal`.
pub fn gap_errors(t_ns: &[u64], ideal: Dur) -> (Dur, Dur, Dur) {
    let errs: Sorted = t_ns.windows(2).map(|w| (w[1] as f64 - w[0] as f64 - ideal.0 as f64).abs()).collect();
    let at = |q| Dur(errs.quantile(q).unwrap_or(0.0).round() as u64);
    (at(0.5), at(0.9), at(0.99))
}

/// Floods `packets` datagrams of `size` IP bytes through a fresh exact link of `rate`.
pub fn link_spacing(rate: Rate, size: usize, packets: u32) -> Result<Spacing> {
    if !(HEADERS + 4..=1500).contains(&size) {
        return Err(anyhow!("size {size}: use {}..=1500 IP bytes (one unfragmented packet)", HEADERS + 4));
    }
    let _stamps = headroom_net::timing::ArrivalTimestamps::on(Duration::from_secs(5))?;
    let mut b = Bottleneck::new(Some(rate), Dur::from_millis(1));
    b.buffer = Buffer::Packets(100_000);
    let tb = Testbed::up(&Topology::dumbbell(1, b))?;
    let rx = tb.run_in("r1", || {
        let s = UdpSocket::bind(("0.0.0.0", PORT))?;
        headroom_net::timing::enable_rx_timestamps(&s)?;
        crate::sys::set_socket_buffers(s.as_raw_fd(), 64 << 20);
        Ok(s)
    })?;
    let receiver = std::thread::spawn(move || -> Result<Vec<u64>> {
        let mut buf = vec![0u8; 2048];
        let mut times = Vec::with_capacity(packets as usize);
        rx.set_read_timeout(Some(Duration::from_secs(5)))?;
        while times.len() < packets as usize {
            match headroom_net::timing::recv_timestamped(&rx, &mut buf) {
                Ok((_, t, _)) => times.push(t.0),
                Err(_) => break,
            }
            // after the first packet, give up 300 ms after the last one
            rx.set_read_timeout(Some(Duration::from_millis(300)))?;
        }
        Ok(times)
    });
    let dst = SocketAddr::V4(SocketAddrV4::new(tb.host("r1")?.addr, PORT));
    let payload = vec![0u8; size - HEADERS];
    let before = tb.delaybox_counters().0;
    tb.run_in("s1", move || {
        let s = UdpSocket::bind("0.0.0.0:0")?;
        crate::sys::set_socket_buffers(s.as_raw_fd(), 64 << 20);
        // The flood stands for a host of its own: at an ordinary priority it shared a core with
        // the box's real-time thread and the machine's other work, and fell behind the link
        // (bursts of ~1 ms with ~1 ms gaps at 500 Mbit/s, measured in issue 19's audit).
        crate::sys::set_realtime(FLOOD_PRIORITY);
        for _ in 0..packets {
            s.send_to(&payload, dst)?;
        }
        Ok(())
    })?;
    let times = receiver.join().map_err(|_| anyhow!("receiver panicked"))??;
    // the flood's share of the box's counters (other packets may have crossed it before)
    let c = tb.delaybox_counters().0.since(&before);
    let own_drops = c.own_drops() + tb.tun_drops()?.0;
    tb.down()?;
    let ideal = Bytes(size as u64).time_at(rate);
    let (median_error, p90_error, p99_error) = gap_errors(&times, ideal);
    let received_rate = match (times.first(), times.last()) {
        (Some(a), Some(z)) if z > a => Bytes(((times.len() - 1) * size) as u64).per(Dur(z - a)),
        _ => Rate::ZERO,
    };
    Ok(Spacing {
        rate,
        size,
        sent: packets,
        received: times.len(),
        ideal,
        median_error,
        p90_error,
        p99_error,
        received_rate,
        own_drops,
        box_late_mean: c.mean_lateness(),
        box_late_p99: c.lateness_quantile_bound(0.99),
        link_idle: c.idle_starts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gap_errors_of_a_jittered_train() {
        // ideal 100 ns; gaps 100, 110, 90, 100, 150
        let t = [0, 100, 210, 300, 400, 550];
        let (med, p90, p99) = gap_errors(&t, Dur(100));
        assert_eq!(med, Dur(10));
        assert_eq!((p90, p99), (Dur(50), Dur(50)));
        // eleven gaps 100 + 0..=10 ns: the order statistics 5, 9 and 10
        let t: Vec<u64> = (0..=11u64).scan(0, |at, i| Some(std::mem::replace(at, *at + 100 + i))).collect();
        assert_eq!(gap_errors(&t, Dur(100)), (Dur(5), Dur(9), Dur(10)));
    }
}
