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
//!
//! A flood never lets the box sleep, so it cannot show how exactly the box stamps arrivals
//! that come while it sleeps. `bench-link --paced` ([`arrival_delays`], issue 19 session 17)
//! sends trains at half the rate, which never queue, and measures how constant their delay is,
//! with the box polling its input after arrivals and sleeping after every packet.

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

/// A two-host testbed whose bottleneck is an exact link of `rate` (1 ms each way, a
/// 100 000-packet buffer so nothing drops; the box polling after arrivals for `arrival_spin`),
/// and a socket in `r1` on [`PORT`] with kernel receive timestamps and a `buffer`-byte
/// receive buffer.
fn link_with_receiver(rate: Rate, arrival_spin: Dur, buffer: i32) -> Result<(Testbed, UdpSocket)> {
    let mut b = Bottleneck::new(Some(rate), Dur::from_millis(1));
    b.buffer = Buffer::Packets(100_000);
    b.arrival_spin = arrival_spin;
    let tb = Testbed::up(&Topology::dumbbell(1, b))?;
    let rx = tb.run_in("r1", move || {
        let s = UdpSocket::bind(("0.0.0.0", PORT))?;
        headroom_net::timing::enable_rx_timestamps(&s)?;
        crate::sys::set_socket_buffers(s.as_raw_fd(), buffer);
        Ok(s)
    })?;
    Ok((tb, rx))
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
    let (tb, rx) = link_with_receiver(rate, Dur::ZERO, 64 << 20)?;
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

/// What a paced stream through one link measured ([`arrival_delays`]).
#[derive(Clone, Debug)]
pub struct ArrivalDelays {
    pub rate: Rate,
    pub size: usize,
    /// The spacing of the stream: twice `size·8 / rate`, so the link never queues.
    pub spacing: Dur,
    /// The box's arrival polling the link ran with (zero: none).
    pub arrival_spin: Dur,
    pub sent: u32,
    pub received: usize,
    /// Median, 90th and 99th percentile of |delay − median delay| over every packet but each
    /// train's first (delay = kernel receive time − the sender's clock just before `send`).
    pub median_dev: Dur,
    pub p90_dev: Dur,
    pub p99_dev: Dur,
    /// Median over the trains of the first packet's delay above the others' median: the box's
    /// wake-up for a packet after a pause (negative if below).
    pub first_excess_ns: i64,
    /// The box's release lateness, mean.
    pub box_late_mean: Dur,
}

/// Trains of `per_train` packets of `size` IP bytes, paced at half the link's rate (every packet
/// finds the link idle), 20 ms apart, through an exact link of `rate` (1 ms each way) whose box
/// polls its input for `arrival_spin` after each arrival: how constant is the delay?
///
/// On an exact link every packet of such a stream has the same delay (propagation plus its own
/// serialisation). What varies is the emulation's error: the sender's stamp-to-wire time, the
/// box's arrival stamp (one wake-up late when the box slept, `crate::delaybox` step 4), its
/// release lateness and the receiving path. A packet stamped late by more than the spacing
/// minus its serialisation also queues the next one behind it.
pub fn arrival_delays(
    rate: Rate,
    size: usize,
    trains: u32,
    per_train: u32,
    arrival_spin: Dur,
) -> Result<ArrivalDelays> {
    const STAMP: usize = 12;
    if !(HEADERS + STAMP..=1500).contains(&size) {
        return Err(anyhow!("size {size}: use {}..=1500 IP bytes (one unfragmented packet)", HEADERS + STAMP));
    }
    if trains == 0 || per_train < 2 {
        return Err(anyhow!("at least one train of two packets"));
    }
    let _stamps = headroom_net::timing::ArrivalTimestamps::on(Duration::from_secs(5))?;
    let (tb, rx) = link_with_receiver(rate, arrival_spin, 16 << 20)?;
    let sent = trains * per_train;
    let receiver = std::thread::spawn(move || -> Result<Vec<(u32, i64)>> {
        let mut buf = vec![0u8; 2048];
        let mut delays = Vec::with_capacity(sent as usize);
        rx.set_read_timeout(Some(Duration::from_secs(5)))?;
        while delays.len() < sent as usize {
            match headroom_net::timing::recv_timestamped(&rx, &mut buf) {
                Ok((n, t, _)) if n >= STAMP => {
                    let seq = u32::from_be_bytes(buf[..4].try_into().expect("4 bytes"));
                    let at = u64::from_be_bytes(buf[4..STAMP].try_into().expect("8 bytes"));
                    delays.push((seq, t.0 as i64 - at as i64));
                }
                Ok(_) => {}
                Err(_) => break,
            }
            rx.set_read_timeout(Some(Duration::from_millis(300)))?;
        }
        Ok(delays)
    });
    let dst = SocketAddr::V4(SocketAddrV4::new(tb.host("r1")?.addr, PORT));
    let spacing = Dur(2 * Bytes(size as u64).time_at(rate).0);
    let before = tb.delaybox_counters().0;
    tb.run_in("s1", move || {
        let s = UdpSocket::bind("0.0.0.0:0")?;
        crate::sys::set_socket_buffers(s.as_raw_fd(), 16 << 20);
        // Above the box, as the flood's sender: the stream's spacing is the sender's to keep.
        crate::sys::set_realtime(FLOOD_PRIORITY);
        let mut payload = vec![0u8; size - HEADERS];
        let mut pacer = headroom_net::timing::Pacer::default();
        for t in 0..trains {
            std::thread::sleep(Duration::from_millis(20));
            let start = std::time::Instant::now();
            for k in 0..per_train {
                pacer.wait_until(start + Duration::from_nanos(spacing.0 * k as u64));
                payload[..4].copy_from_slice(&(t * per_train + k).to_be_bytes());
                payload[4..STAMP].copy_from_slice(&headroom_net::timing::realtime_now().0.to_be_bytes());
                s.send_to(&payload, dst)?;
            }
        }
        Ok(())
    })?;
    let delays = receiver.join().map_err(|_| anyhow!("receiver panicked"))??;
    let c = tb.delaybox_counters().0.since(&before);
    tb.down()?;
    let is_first = |seq: u32| seq.is_multiple_of(per_train);
    let rest: Sorted = delays.iter().filter(|(q, _)| !is_first(*q)).map(|(_, d)| *d as f64).collect();
    let centre = rest.quantile(0.5).ok_or_else(|| anyhow!("no packet but the trains' first arrived"))?;
    let devs: Sorted = delays.iter().filter(|(q, _)| !is_first(*q)).map(|(_, d)| (*d as f64 - centre).abs()).collect();
    let firsts: Sorted = delays.iter().filter(|(q, _)| is_first(*q)).map(|(_, d)| *d as f64 - centre).collect();
    let at = |q| Dur(devs.quantile(q).unwrap_or(0.0).round() as u64);
    Ok(ArrivalDelays {
        rate,
        size,
        spacing,
        arrival_spin,
        sent,
        received: delays.len(),
        median_dev: at(0.5),
        p90_dev: at(0.9),
        p99_dev: at(0.99),
        first_excess_ns: firsts.quantile(0.5).unwrap_or(0.0).round() as i64,
        box_late_mean: c.mean_lateness(),
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
