//! Send data in the background to a `headroom recv` and read the live available-bandwidth
//! estimate, through the library (`headroom_net::transfer`).
//!
//! ```text
//! headroom recv --listen 127.0.0.1:5301 &
//! cargo run --release -p headroom-net --example background_send -- 127.0.0.1:5301 5
//! ```

use std::net::TcpStream;
use std::time::Duration;

use headroom_core::cc::imtcp_bg::ImtcpBgConfig;
use headroom_core::imtcp::ControlConfig;
use headroom_net::transfer::{send_on, IntervalReport, Mode, SendLimit, SendOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:5301".into());
    let seconds: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5);
    // The application's own connection; the library only needs a connected TcpStream.
    let stream = TcpStream::connect(&addr)?;
    let mut measure = ControlConfig::default();
    measure.measurement.delayed_ack = true;
    let opts = SendOptions {
        limit: SendLimit::Time(Duration::from_secs(seconds)),
        interval: Some(Duration::from_millis(500)),
        mode: Mode::Background(Box::new(measure), ImtcpBgConfig::headroom(35)),
        ..SendOptions::default()
    };
    // Called every interval from the sending loop: the live estimate and the background limit.
    let mut live = |r: &IntervalReport| {
        let avail = r.smoothed.map_or("none yet".to_string(), |a| format!("{:.1} Mbit/s", a.as_mbps()));
        println!(
            "{:5.1} s: sending {:6.1} Mbit/s, available {avail}, in-flight limit {} B",
            r.end.as_secs_f64(),
            r.rate.as_mbps(),
            r.limit.map_or(0, |l| l.0)
        );
    };
    let report = send_on(stream, &opts, &mut live)?;
    println!("{} B in {:.1} s, {} estimates", report.bytes, report.duration.as_secs_f64(), report.estimates.len());
    Ok(())
}
