// One bulk TCP flow over a dumbbell path in ns-3 (Debian's libns3-dev, 3.37), for comparison
// with headroom's simulator (issue 20; driven by scripts/ns3-compare.sh, not part of the tests).
//
//   sender --1 Gbit/s, 0 ms-- r1 --RATE, DELAY, DropTail QUEUE packets-- r2 --1 Gbit/s, 0 ms-- receiver
//
// The TCP settings follow headroom's simulator defaults wherever ns-3 has an attribute for them
// (the scenario of crates/sim/tests/newreno.rs: a `[[tcp]]` flow with no options):
//   - segment size 1460 bytes (headroom: mss 1460);
//   - initial window 2 segments (ns-3's default is 10);
//   - delayed ACK off: DelAckCount 1 (ns-3's default is 2);
//   - SACK off (headroom has none; --sack=true turns it on for reference: ns-3's loss recovery
//     without SACK guesses a scoreboard from duplicate ACKs, which after a timeout can retransmit
//     one segment still in flight per new ACK, see docs/results.md), timestamps on (as headroom),
//     window scaling on (so the large buffers below are usable; headroom's receiver window is 1 GiB);
//   - send and receive buffers 64 MiB (ns-3's default is 128 KiB, which would cap the window);
//   - RTO minimum 200 ms and clock granularity 10 ms (headroom's ns-2 preset; ns-3: 1 s, 1 ms);
//   - limited transmit off (RFC 3042; headroom does not implement it, ns-3 has it on);
//   - DataRetries 1000 so that repeated timeouts never abort the connection (headroom never does);
//   - recovery: TcpClassicRecovery (RFC 6582 NewReno fast recovery: cwnd = ssthresh + 3 segments,
//     inflated per duplicate ACK, deflated on partial ACKs) rather than ns-3's default PRR
//     (RFC 6937), because headroom's `newreno` is RFC 6582's.
//   - every queue is a plain DropTail: the traffic-control layer's default pfifo_fast queue disc
//     (1000 packets in front of the device's queue) is removed; the access links' device queues
//     hold 1000 packets, as headroom's default link queue; the bottleneck holds QUEUE packets
//     waiting besides the one being sent, as headroom's (details at the queue set-up below).
//   - IP MTU 1512 on every link, so that a 1460-byte segment with its 12-byte timestamp option
//     is one packet, not two fragments (ns-3's default MTU is 1500; details at `mtu` below).
// What is left different (no attribute, or no counterpart in headroom): ns-3 opens the
// connection with a three-way handshake; its segments carry 12 bytes of timestamp option and the
// point-to-point link a 2-byte PPP header (1514 bytes on the wire, headroom: 1500, so ns-3's
// goodput is at most 96.4 % of the link rate, headroom's 97.3 %); its RTO is
// not rounded up to the clock granularity; its full ACK sets cwnd = ssthresh (headroom:
// min(ssthresh, FlightSize + SMSS)); its bytes in flight subtract segments reported by duplicate
// ACKs (an emulated SACK scoreboard).
//
// Output: one line of key=value pairs, parsed by scripts/ns3-compare.sh: goodput_mbps (bytes the
// receiving application got / duration), timeouts (entries into CA_LOSS), fast_recoveries
// (entries into CA_RECOVERY), retransmits (data segments sent again), duplicates (data segments
// the receiver got twice: spurious retransmissions), segments, drops (at the bottleneck),
// max_cwnd_bytes. --trace prints cwnd, ssthresh, state changes, drops and retransmissions on
// stderr.

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <cstdint>
#include <iomanip>
#include <iostream>
#include <set>
#include <string>

using namespace ns3;

namespace
{

struct Counters
{
    uint64_t timeouts = 0;        // entries into CA_LOSS (retransmission timeouts)
    uint64_t fastRecoveries = 0;  // entries into CA_RECOVERY (fast retransmits)
    uint64_t retransmits = 0;     // data segments sent below the highest sequence already sent
    uint64_t segments = 0;        // data segments sent
    uint64_t drops = 0;           // packets dropped by the bottleneck's queue (r1 -> r2)
    uint64_t duplicates = 0;      // data segments reaching the receiver a second time (spurious)
    uint32_t maxCwnd = 0;         // largest congestion window (bytes)
    bool anySent = false;
    SequenceNumber32 highEnd{0};  // one past the highest data byte sent
};

Counters g;
bool g_trace = false; // --trace: cwnd and state changes on stderr

void
OnCongState(TcpSocketState::TcpCongState_t, TcpSocketState::TcpCongState_t now)
{
    if (g_trace)
    {
        std::cerr << Simulator::Now().GetSeconds() << " state " << TcpSocketState::TcpCongStateName[now] << "\n";
    }
    if (now == TcpSocketState::CA_LOSS)
    {
        g.timeouts++;
    }
    else if (now == TcpSocketState::CA_RECOVERY)
    {
        g.fastRecoveries++;
    }
}

void
OnTx(Ptr<const Packet> p, const TcpHeader& h, Ptr<const TcpSocketBase>)
{
    uint32_t len = p->GetSize();
    if (len == 0)
    {
        return;
    }
    g.segments++;
    SequenceNumber32 end = h.GetSequenceNumber() + len;
    if (g.anySent && end <= g.highEnd)
    {
        g.retransmits++;
        if (g_trace)
        {
            std::cerr << Simulator::Now().GetSeconds() << " retx " << h.GetSequenceNumber() << "\n";
        }
    }
    else
    {
        g.highEnd = end;
        g.anySent = true;
    }
}

void
OnCwnd(uint32_t, uint32_t now)
{
    if (g_trace)
    {
        std::cerr << Simulator::Now().GetSeconds() << " cwnd " << now << "\n";
    }
    if (now > g.maxCwnd)
    {
        g.maxCwnd = now;
    }
}

void
OnDrop(Ptr<const QueueDiscItem>)
{
    g.drops++;
    if (g_trace)
    {
        std::cerr << Simulator::Now().GetSeconds() << " drop\n";
    }
}

void
OnSsthresh(uint32_t, uint32_t now)
{
    if (g_trace)
    {
        std::cerr << Simulator::Now().GetSeconds() << " ssthresh " << now << "\n";
    }
}

std::set<uint32_t> g_received; // sequence numbers of the data segments the receiver got

// The receiver's IPv4 layer: a data segment whose sequence number arrived before is a duplicate
// (the sender retransmitted a segment that had not been lost).
void
OnReceiverIpRx(Ptr<const Packet> p, Ptr<Ipv4>, uint32_t)
{
    Ptr<Packet> c = p->Copy();
    Ipv4Header ip;
    c->RemoveHeader(ip);
    if (ip.GetProtocol() != TcpL4Protocol::PROT_NUMBER)
    {
        return;
    }
    TcpHeader tcp;
    c->RemoveHeader(tcp);
    if (c->GetSize() == 0)
    {
        return;
    }
    if (!g_received.insert(tcp.GetSequenceNumber().GetValue()).second)
    {
        g.duplicates++;
    }
}

void
ConnectSocketTraces(Ptr<BulkSendApplication> app)
{
    Ptr<Socket> s = app->GetSocket();
    if (!s)
    {
        std::cerr << "newreno_path: the bulk sender has no socket\n";
        std::exit(2);
    }
    s->TraceConnectWithoutContext("CongState", MakeCallback(&OnCongState));
    s->TraceConnectWithoutContext("Tx", MakeCallback(&OnTx));
    s->TraceConnectWithoutContext("CongestionWindow", MakeCallback(&OnCwnd));
    s->TraceConnectWithoutContext("SlowStartThreshold", MakeCallback(&OnSsthresh));
}

} // namespace

int
main(int argc, char* argv[])
{
    std::string rate = "50Mbps";
    std::string delay = "10ms";
    uint32_t queue = 100;
    double duration = 30.0;
    std::string cc = "TcpNewReno";
    std::string recovery = "TcpClassicRecovery";
    uint32_t initialCwnd = 2;
    double minRtoMs = 200.0;
    double granularityMs = 10.0;
    bool sack = false;

    CommandLine cmd(__FILE__);
    cmd.AddValue("rate", "bottleneck rate (ns-3 DataRate, e.g. 50Mbps)", rate);
    cmd.AddValue("delay", "bottleneck one-way delay (ns-3 Time, e.g. 10ms)", delay);
    cmd.AddValue("queue", "bottleneck DropTail limit in packets", queue);
    cmd.AddValue("duration", "simulated seconds", duration);
    cmd.AddValue("cc", "congestion control: TcpNewReno or TcpLinuxReno", cc);
    cmd.AddValue("recovery", "fast recovery: TcpClassicRecovery (RFC 6582) or TcpPrrRecovery", recovery);
    cmd.AddValue("initialCwnd", "initial window in segments", initialCwnd);
    cmd.AddValue("minRtoMs", "minimum RTO in ms", minRtoMs);
    cmd.AddValue("granularityMs", "RTO clock granularity in ms", granularityMs);
    cmd.AddValue("sack", "enable SACK (headroom has none; for exploration only)", sack);
    cmd.AddValue("trace", "print cwnd and congestion-state changes on stderr", g_trace);
    cmd.Parse(argc, argv);

    if (queue < 2 || duration <= 0.0 || initialCwnd == 0)
    {
        std::cerr << "newreno_path: --queue must be at least 2, --duration and --initialCwnd positive\n";
        return 2;
    }
    if (cc != "TcpNewReno" && cc != "TcpLinuxReno")
    {
        std::cerr << "newreno_path: --cc must be TcpNewReno or TcpLinuxReno\n";
        return 2;
    }
    if (recovery != "TcpClassicRecovery" && recovery != "TcpPrrRecovery")
    {
        std::cerr << "newreno_path: --recovery must be TcpClassicRecovery or TcpPrrRecovery\n";
        return 2;
    }

    const uint32_t mss = 1460;
    const uint32_t buffer = 64u << 20;
    // IP MTU: a 1460-byte segment with the 12-byte timestamp option is a 1512-byte IP packet.
    // With ns-3's default 1500, IPv4 fragments every segment in two (1500 + 32 bytes), so a
    // queue of N packets holds only N / 2 segments and a lost fragment loses the segment.
    // headroom counts one 1500-byte packet per segment; 1512 keeps one packet per segment.
    const uint32_t mtu = 1512;
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TypeId::LookupByName("ns3::" + cc)));
    Config::SetDefault("ns3::TcpL4Protocol::RecoveryType",
                       TypeIdValue(TypeId::LookupByName("ns3::" + recovery)));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(mss));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(initialCwnd));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(1));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(buffer));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(buffer));
    Config::SetDefault("ns3::TcpSocket::DataRetries", UintegerValue(1000));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(sack));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::WindowScaling", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::LimitedTransmit", BooleanValue(false));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MilliSeconds(minRtoMs)));
    Config::SetDefault("ns3::TcpSocketBase::ClockGranularity", TimeValue(MilliSeconds(granularityMs)));

    NodeContainer nodes;
    nodes.Create(4); // 0 sender, 1 r1, 2 r2, 3 receiver

    PointToPointHelper access;
    access.SetDeviceAttribute("DataRate", StringValue("1Gbps"));
    access.SetDeviceAttribute("Mtu", UintegerValue(mtu));
    access.SetChannelAttribute("Delay", StringValue("0ms"));
    access.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("1000p"));
    PointToPointHelper bottleneck;
    bottleneck.SetDeviceAttribute("DataRate", StringValue(rate));
    bottleneck.SetDeviceAttribute("Mtu", UintegerValue(mtu));
    bottleneck.SetChannelAttribute("Delay", StringValue(delay));
    bottleneck.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("1p"));

    NetDeviceContainer d0 = access.Install(nodes.Get(0), nodes.Get(1));
    NetDeviceContainer d1 = bottleneck.Install(nodes.Get(1), nodes.Get(2));
    NetDeviceContainer d2 = access.Install(nodes.Get(2), nodes.Get(3));

    InternetStackHelper stack;
    stack.Install(nodes);
    Ipv4AddressHelper addr;
    addr.SetBase("10.0.0.0", "255.255.255.0");
    addr.Assign(d0);
    addr.SetBase("10.0.1.0", "255.255.255.0");
    addr.Assign(d1);
    addr.SetBase("10.0.2.0", "255.255.255.0");
    Ipv4InterfaceContainer i2 = addr.Assign(d2);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    // Plain DropTail queues. The access links: no queue disc, 1000-packet device queues (the
    // traffic-control layer's default pfifo_fast, installed by Assign, is removed). The
    // bottleneck r1 -> r2: a FifoQueueDisc of QUEUE - 1 packets in front of a 1-packet device
    // queue, so that QUEUE packets wait besides the one on the wire (as in headroom) and drops
    // are visible: without a queue disc, r1's traffic-control layer discards packets silently
    // while the full device queue is stopped (flow control), with no trace source.
    TrafficControlHelper tch;
    tch.Uninstall(d0);
    tch.Uninstall(d1);
    tch.Uninstall(d2);
    TrafficControlHelper fifo;
    fifo.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", StringValue(std::to_string(queue - 1) + "p"));
    QueueDiscContainer qd = fifo.Install(d1.Get(0));
    qd.Get(0)->TraceConnectWithoutContext("Drop", MakeCallback(&OnDrop));

    nodes.Get(3)->GetObject<Ipv4L3Protocol>()->TraceConnectWithoutContext("Rx", MakeCallback(&OnReceiverIpRx));

    const uint16_t port = 5000;
    PacketSinkHelper sinkHelper("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
    ApplicationContainer sinkApp = sinkHelper.Install(nodes.Get(3));
    sinkApp.Start(Seconds(0.0));
    sinkApp.Stop(Seconds(duration));

    BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(i2.GetAddress(1), port));
    bulk.SetAttribute("MaxBytes", UintegerValue(0));
    bulk.SetAttribute("SendSize", UintegerValue(mss));
    ApplicationContainer bulkApp = bulk.Install(nodes.Get(0));
    bulkApp.Start(Seconds(0.0));
    bulkApp.Stop(Seconds(duration));

    Simulator::Schedule(MicroSeconds(1),
                        &ConnectSocketTraces,
                        DynamicCast<BulkSendApplication>(bulkApp.Get(0)));
    Simulator::Stop(Seconds(duration));
    Simulator::Run();

    uint64_t rx = DynamicCast<PacketSink>(sinkApp.Get(0))->GetTotalRx();
    Simulator::Destroy();

    std::cout << std::fixed << std::setprecision(3) << "goodput_mbps=" << rx * 8.0 / duration / 1e6
              << " bytes=" << rx << " timeouts=" << g.timeouts << " fast_recoveries=" << g.fastRecoveries
              << " retransmits=" << g.retransmits << " duplicates=" << g.duplicates << " segments=" << g.segments << " drops=" << g.drops
              << " max_cwnd_bytes=" << g.maxCwnd << "\n";
    return 0;
}
