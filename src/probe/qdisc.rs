//! The queueing disciplines (qdiscs) of the host's network namespace and
//! of the server's, when it runs in one of its own: what they shape to, the
//! loss and delay they add on purpose, and what they passed, dropped and
//! held back. A link shaped to 2 Mbit/s on a veth that reports 10 Gb/s
//! shows only here.
//!
//! Read over rtnetlink (an `RTM_GETQDISC` dump, and an `RTM_GETLINK` dump
//! for interface names), never by running `tc`. Formats from the kernel's
//! uapi headers: linux/rtnetlink.h (`tcmsg`, `TCA_*`), linux/gen_stats.h
//! (`TCA_STATS_BASIC` = `gnet_stats_basic`, `TCA_STATS_QUEUE` =
//! `gnet_stats_queue`, `TCA_STATS_PKT64`), linux/pkt_sched.h (`tc_stats`,
//! `tc_tbf_qopt` with `TCA_TBF_PARMS`/`TCA_TBF_RATE64`, `tc_netem_qopt`
//! followed by `TCA_NETEM_*` attributes), linux/if_link.h (`IFLA_IFNAME`).
//! A netem qopt's latency is in packet-scheduler ticks of 64 ns
//! (`PSCHED_SHIFT` 6, include/net/pkt_sched.h); its loss is a share of
//! `u32::MAX`.

use super::netlink::{self, NetlinkError, RouteSocket};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const TCMSG_LEN: usize = 20;
const IFINFOMSG_LEN: usize = 16;
const IFLA_IFNAME: u16 = 3;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_STATS: u16 = 3;
const TCA_STATS2: u16 = 7;
const TCA_STATS_BASIC: u16 = 1;
const TCA_STATS_QUEUE: u16 = 3;
const TCA_STATS_PKT64: u16 = 8;
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;
const TC_NETEM_QOPT_LEN: usize = 24;
const TCA_NETEM_RATE: u16 = 6;
const TCA_NETEM_RATE64: u16 = 8;
const TCA_NETEM_LATENCY64: u16 = 10;
/// Nanoseconds per packet-scheduler tick.
const PSCHED_TICK_NS: u64 = 64;

/// One queueing discipline over one interval.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct QdiscSample {
    pub(crate) interface: String,
    /// `host`, or `server` for the server's own network namespace.
    pub namespace: String,
    /// `tbf`, `netem`, `htb`, `fq_codel`, …
    pub kind: String,
    /// The rate it shapes to, bytes per second (tbf, htb), when it shapes.
    pub rate_bytes_per_s: Option<f64>,
    /// The share of packets it drops on purpose (netem `loss`).
    pub(crate) loss: Option<f64>,
    /// The delay it adds, seconds (netem `delay`).
    pub(crate) delay_s: Option<f64>,
    pub bytes_per_s: f64,
    pub(crate) packets_per_s: f64,
    /// Counts over the interval.
    pub(crate) drops: u64,
    pub overlimits: u64,
    /// Bytes queued at the end of the interval.
    pub(crate) backlog_bytes: u64,
}

/// One qdisc's counters and settings at one moment.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct QdiscCounters {
    /// `host`, or `server` for the server's own network namespace.
    pub namespace: String,
    pub interface: String,
    pub(crate) ifindex: i32,
    /// Its handle and its parent's (`major << 16 | minor`; the root's
    /// parent is `0xffffffff`).
    pub(crate) handle: u32,
    pub(crate) parent: u32,
    /// `tbf`, `netem`, `fq_codel`, …
    pub kind: String,
    /// Bytes and packets it sent since it was made.
    pub bytes: u64,
    pub packets: u64,
    pub(crate) drops: u64,
    pub(crate) overlimits: u64,
    /// Bytes queued now.
    pub(crate) backlog_bytes: u64,
    /// The rate it shapes to, bytes per second (tbf, netem `rate`).
    pub rate_bytes_per_s: Option<f64>,
    /// The share of packets it drops on purpose (netem).
    pub loss: Option<f64>,
    /// The delay it adds, seconds (netem).
    pub delay_s: Option<f64>,
}

/// Reads the qdiscs of the host's namespace and, when the server lives in
/// another, of the server's; keeps its sockets from one sample to the next
/// so that entering the server's namespace happens once per run.
#[derive(Debug, Default)]
pub struct QdiscReader {
    host: Option<Namespace>,
    /// The server's namespace (its inode), a socket inside it.
    server: Option<(u64, Namespace)>,
    /// Why the last read missed a namespace, if it did.
    pub last_error: Option<String>,
}

/// A socket in one namespace and the names of its links, dumped again only
/// when a qdisc names a link not among them (a dump per sample cost as much
/// as the qdiscs' own).
#[derive(Debug)]
struct Namespace {
    socket: RouteSocket,
    links: BTreeMap<i32, String>,
}

impl Namespace {
    fn new(socket: RouteSocket) -> Self {
        Namespace {
            socket,
            links: BTreeMap::new(),
        }
    }

    /// The qdiscs of the namespace with interface names, labelled
    /// `namespace`; `noqueue` left out.
    fn read(&mut self, namespace: &str) -> Result<Vec<QdiscCounters>, NetlinkError> {
        let qdiscs = parse_qdiscs(&self.socket.dump(libc::RTM_GETQDISC, &[0u8; TCMSG_LEN])?);
        if qdiscs.iter().any(|q| !self.links.contains_key(&q.ifindex)) {
            let links = self.socket.dump(libc::RTM_GETLINK, &[0u8; IFINFOMSG_LEN])?;
            self.links = parse_link_names(&links);
        }
        Ok(named(qdiscs, &self.links, namespace))
    }
}

impl QdiscReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every qdisc but `noqueue` (the default of loopback and virtual
    /// links, which queues nothing) in this process's namespace, labelled
    /// `host`, and in the namespace of `server_pid` when it differs,
    /// labelled `server`. `proc` is `/proc`. A namespace that cannot be read
    /// is left out and the reason kept in `last_error`.
    pub fn read(&mut self, proc: &Path, server_pid: Option<u32>) -> Vec<QdiscCounters> {
        self.last_error = None;
        let mut out = Vec::new();
        if self.host.is_none() {
            match RouteSocket::open() {
                Ok(s) => self.host = Some(Namespace::new(s)),
                Err(e) => self.last_error = Some(e.to_string()),
            }
        }
        if let Some(ns) = &mut self.host {
            match ns.read("host") {
                Ok(q) => out.extend(q),
                Err(e) => {
                    self.last_error = Some(e.to_string());
                    self.host = None;
                }
            }
        }
        let inode = |pid: &str| {
            std::fs::metadata(proc.join(pid).join("ns/net"))
                .ok()
                .map(|m| m.ino())
        };
        let Some(pid) = server_pid else {
            return out;
        };
        let (Some(own), Some(theirs)) = (inode("self"), inode(&pid.to_string())) else {
            return out;
        };
        if own == theirs {
            return out;
        }
        if self.server.as_ref().is_none_or(|(ino, _)| *ino != theirs) {
            self.server = None;
            match RouteSocket::open_in_namespace(&proc.join(pid.to_string()).join("ns/net")) {
                Ok(s) => self.server = Some((theirs, Namespace::new(s))),
                Err(e) => self.last_error = Some(e.to_string()),
            }
        }
        if let Some((_, ns)) = &mut self.server {
            match ns.read("server") {
                Ok(q) => out.extend(q),
                Err(e) => {
                    self.last_error = Some(e.to_string());
                    self.server = None;
                }
            }
        }
        out
    }
}

/// Names and labels parsed qdiscs, leaving out `noqueue`.
pub(crate) fn named(
    qdiscs: Vec<QdiscCounters>,
    names: &BTreeMap<i32, String>,
    namespace: &str,
) -> Vec<QdiscCounters> {
    qdiscs
        .into_iter()
        .filter(|q| q.kind != "noqueue")
        .map(|mut q| {
            q.interface = names
                .get(&q.ifindex)
                .cloned()
                .unwrap_or_else(|| format!("if{}", q.ifindex));
            q.namespace = namespace.to_string();
            q
        })
        .collect()
}

/// Interface names by index, from an `RTM_GETLINK` dump.
pub(crate) fn parse_link_names(dump: &[u8]) -> BTreeMap<i32, String> {
    netlink::messages(dump)
        .filter(|m| m.kind == libc::RTM_NEWLINK)
        .filter_map(|m| {
            let index = i32::from_ne_bytes(m.payload.get(4..8)?.try_into().ok()?);
            let name = netlink::attributes(netlink::after_header(m.payload, IFINFOMSG_LEN)?)
                .find(|(k, _)| *k == IFLA_IFNAME)
                .map(|(_, v)| netlink::string(v))?;
            Some((index, name))
        })
        .collect()
}

/// The qdiscs of an `RTM_GETQDISC` dump, unnamed; a message too short for
/// its header is skipped, a malformed attribute ends that message's walk.
pub(crate) fn parse_qdiscs(dump: &[u8]) -> Vec<QdiscCounters> {
    netlink::messages(dump)
        .filter(|m| m.kind == libc::RTM_NEWQDISC)
        .filter_map(|m| parse_qdisc(m.payload))
        .collect()
}

fn parse_qdisc(payload: &[u8]) -> Option<QdiscCounters> {
    let mut q = QdiscCounters {
        ifindex: i32::from_ne_bytes(payload.get(4..8)?.try_into().ok()?),
        handle: netlink::u32_at(payload, 8)?,
        parent: netlink::u32_at(payload, 12)?,
        ..QdiscCounters::default()
    };
    let attrs = netlink::after_header(payload, TCMSG_LEN)?;
    let mut options = None;
    let mut have_stats2 = false;
    for (kind, value) in netlink::attributes(attrs) {
        match kind {
            TCA_KIND => q.kind = netlink::string(value),
            TCA_OPTIONS => options = Some(value),
            TCA_STATS2 => {
                have_stats2 = true;
                stats2(value, &mut q);
            }
            TCA_STATS if !have_stats2 => old_stats(value, &mut q),
            _ => {}
        }
    }
    // Options are read once the kind is known (it comes first in practice,
    // but nothing promises it).
    if let Some(value) = options {
        match q.kind.as_str() {
            "tbf" => tbf(value, &mut q),
            "netem" => netem(value, &mut q),
            _ => {}
        }
    }
    Some(q)
}

/// `TCA_STATS2`: nested basic and queue statistics.
fn stats2(value: &[u8], q: &mut QdiscCounters) {
    for (kind, v) in netlink::attributes(value) {
        match kind {
            TCA_STATS_BASIC => {
                // gnet_stats_basic { u64 bytes; u32 packets; }
                if let (Some(bytes), Some(packets)) = (netlink::u64_at(v, 0), netlink::u32_at(v, 8))
                {
                    q.bytes = bytes;
                    q.packets = q.packets.max(u64::from(packets));
                }
            }
            TCA_STATS_PKT64 => {
                if let Some(packets) = netlink::u64_at(v, 0) {
                    q.packets = packets;
                }
            }
            TCA_STATS_QUEUE => {
                // gnet_stats_queue { qlen, backlog, drops, requeues, overlimits } (u32)
                if let (Some(backlog), Some(drops), Some(overlimits)) = (
                    netlink::u32_at(v, 4),
                    netlink::u32_at(v, 8),
                    netlink::u32_at(v, 16),
                ) {
                    q.backlog_bytes = u64::from(backlog);
                    q.drops = u64::from(drops);
                    q.overlimits = u64::from(overlimits);
                }
            }
            _ => {}
        }
    }
}

/// `TCA_STATS`: the old `tc_stats` { u64 bytes; u32 packets, drops,
/// overlimits, bps, pps, qlen, backlog; }.
fn old_stats(v: &[u8], q: &mut QdiscCounters) {
    let fields = (
        netlink::u64_at(v, 0),
        netlink::u32_at(v, 8),
        netlink::u32_at(v, 12),
        netlink::u32_at(v, 16),
        netlink::u32_at(v, 32),
    );
    if let (Some(bytes), Some(packets), Some(drops), Some(overlimits), Some(backlog)) = fields {
        q.bytes = bytes;
        q.packets = u64::from(packets);
        q.drops = u64::from(drops);
        q.overlimits = u64::from(overlimits);
        q.backlog_bytes = u64::from(backlog);
    }
}

/// tbf: `TCA_TBF_PARMS` (`tc_tbf_qopt`, whose first `tc_ratespec` has the
/// rate in bytes/s at offset 8), overridden by `TCA_TBF_RATE64` when the
/// rate does not fit 32 bits.
fn tbf(options: &[u8], q: &mut QdiscCounters) {
    let mut rate32 = None;
    let mut rate64 = None;
    for (kind, v) in netlink::attributes(options) {
        match kind {
            TCA_TBF_PARMS => rate32 = netlink::u32_at(v, 8).map(u64::from),
            TCA_TBF_RATE64 => rate64 = netlink::u64_at(v, 0),
            _ => {}
        }
    }
    q.rate_bytes_per_s = rate64.or(rate32).filter(|r| *r > 0).map(|r| r as f64);
}

/// netem: a `tc_netem_qopt` { latency (ticks), limit, loss, gap,
/// duplicate, jitter } (u32), then attributes.
fn netem(options: &[u8], q: &mut QdiscCounters) {
    let (Some(latency_ticks), Some(loss)) =
        (netlink::u32_at(options, 0), netlink::u32_at(options, 8))
    else {
        return;
    };
    let mut latency_ns = u64::from(latency_ticks) * PSCHED_TICK_NS;
    let mut rate32 = None;
    let mut rate64 = None;
    if let Some(attrs) = options.get(netlink::align4(TC_NETEM_QOPT_LEN)..) {
        for (kind, v) in netlink::attributes(attrs) {
            match kind {
                TCA_NETEM_LATENCY64 => {
                    if let Some(ns) = netlink::u64_at(v, 0) {
                        // An s64 in the kernel; a negative delay is none.
                        latency_ns = u64::try_from(ns as i64).unwrap_or(0);
                    }
                }
                TCA_NETEM_RATE => rate32 = netlink::u32_at(v, 0).map(u64::from),
                TCA_NETEM_RATE64 => rate64 = netlink::u64_at(v, 0),
                _ => {}
            }
        }
    }
    q.loss = Some(f64::from(loss) / f64::from(u32::MAX));
    q.delay_s = Some(latency_ns as f64 / 1e9);
    q.rate_bytes_per_s = rate64.or(rate32).filter(|r| *r > 0).map(|r| r as f64);
}

impl QdiscSample {
    /// Each qdisc of `after` over the interval since `before` (matched by
    /// namespace, interface and handle). A qdisc that appeared in a
    /// namespace that was read before counts from zero (it was made during
    /// the interval); one in a namespace not read before has no sample.
    pub fn all_between(
        before: &[QdiscCounters],
        after: &[QdiscCounters],
        seconds: f64,
    ) -> Vec<QdiscSample> {
        use crate::probe::counters::believe::{increase, per_second};
        // A counter that went backwards or leapt beyond belief grew by none.
        let grew = |x: u64, y: u64| increase(x, y, seconds);
        let rate = |n: u64| per_second(n, seconds);
        after
            .iter()
            .filter_map(|b| {
                let a = match before.iter().find(|a| {
                    a.namespace == b.namespace && a.interface == b.interface && a.handle == b.handle
                }) {
                    Some(a) => a.clone(),
                    None if before.iter().any(|a| a.namespace == b.namespace) => {
                        QdiscCounters::default()
                    }
                    None => return None,
                };
                Some(QdiscSample {
                    interface: b.interface.clone(),
                    namespace: b.namespace.clone(),
                    kind: b.kind.clone(),
                    rate_bytes_per_s: b.rate_bytes_per_s,
                    loss: b.loss,
                    delay_s: b.delay_s,
                    bytes_per_s: rate(grew(a.bytes, b.bytes)),
                    packets_per_s: rate(grew(a.packets, b.packets)),
                    drops: grew(a.drops, b.drops),
                    overlimits: grew(a.overlimits, b.overlimits),
                    backlog_bytes: b.backlog_bytes,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/netlink")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// A dump captured from a throwaway namespace (see tests/it/qdisc.rs,
    /// `PERFLAB_CAPTURE_NETLINK`): `tbf rate 2mbit burst 32kbit` on pl-a
    /// after a burst of UDP traffic, pl-c and lo left with noqueue.
    #[test]
    fn a_captured_dump_has_the_tbf_rate_and_its_counters() {
        let names = parse_link_names(&fixture("links.bin"));
        assert!(names.values().any(|n| n == "pl-a"), "{names:?}");
        assert!(names.values().any(|n| n == "lo"), "{names:?}");
        let raw = parse_qdiscs(&fixture("qdiscs.bin"));
        assert!(raw.iter().any(|q| q.kind == "noqueue"), "{raw:?}");
        let qdiscs = named(raw, &names, "server");
        assert_eq!(qdiscs.len(), 1, "noqueue is left out: {qdiscs:?}");
        let tbf = &qdiscs[0];
        assert_eq!(tbf.kind, "tbf");
        assert_eq!(tbf.interface, "pl-a");
        assert_eq!(tbf.namespace, "server");
        assert_eq!(tbf.parent, u32::MAX, "the root qdisc");
        assert_eq!(tbf.rate_bytes_per_s, Some(250_000.0));
        assert_eq!((tbf.loss, tbf.delay_s), (None, None));
        assert!(tbf.packets > 0 && tbf.bytes > tbf.packets, "{tbf:?}");
        assert!(tbf.overlimits > 0, "{tbf:?}");
    }

    fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(value);
        out.resize(netlink::align4(out.len()), 0);
        out
    }

    /// An `RTM_NEWQDISC` message on interface 7 with these attributes.
    fn qdisc_message(attrs: &[Vec<u8>]) -> Vec<u8> {
        let mut payload = vec![0u8; TCMSG_LEN];
        payload[4..8].copy_from_slice(&7i32.to_ne_bytes());
        payload[8..12].copy_from_slice(&0x8001_0000u32.to_ne_bytes());
        payload[12..16].copy_from_slice(&u32::MAX.to_ne_bytes());
        for a in attrs {
            payload.extend_from_slice(a);
        }
        let mut out = Vec::new();
        out.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
        out.extend_from_slice(&libc::RTM_NEWQDISC.to_ne_bytes());
        out.extend_from_slice(&[0u8; 10]);
        out.extend_from_slice(&payload);
        out
    }

    fn u32s(values: &[u32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    /// netem, laid out as linux/pkt_sched.h defines it (this lab's kernel
    /// has no sch_netem to capture from): `loss 3% delay 10ms` is a qopt
    /// with loss 0.03 × u32::MAX and latency 156 250 ticks of 64 ns, then
    /// `TCA_NETEM_LATENCY64` in ns on kernels since 4.15, and the basic and
    /// queue statistics in `TCA_STATS2`.
    #[test]
    fn netem_loss_and_delay_come_from_its_qopt_and_latency64() {
        let loss = (0.03 * f64::from(u32::MAX)).round() as u32;
        let qopt = u32s(&[156_250, 1000, loss, 0, 0, 0]);
        let mut options = qopt.clone();
        options.extend(attr(TCA_NETEM_LATENCY64, &10_000_000u64.to_ne_bytes()));
        let mut basic = 123_456u64.to_ne_bytes().to_vec();
        basic.extend(u32s(&[321, 0]));
        let mut stats = attr(TCA_STATS_BASIC, &basic);
        stats.extend(attr(TCA_STATS_QUEUE, &u32s(&[2, 3000, 9, 0, 4])));
        let bytes = qdisc_message(&[
            attr(TCA_KIND, b"netem\0"),
            attr(TCA_OPTIONS, &options),
            attr(TCA_STATS2, &stats),
        ]);
        let q = &parse_qdiscs(&bytes)[0];
        assert_eq!(q.kind, "netem");
        assert!((q.loss.unwrap() - 0.03).abs() < 1e-9, "{q:?}");
        assert_eq!(q.delay_s, Some(0.010));
        assert_eq!((q.bytes, q.packets), (123_456, 321));
        assert_eq!((q.backlog_bytes, q.drops, q.overlimits), (3000, 9, 4));
        assert_eq!(q.rate_bytes_per_s, None);
        // An older kernel: no LATENCY64, the delay from the qopt's ticks;
        // the old TCA_STATS block in place of TCA_STATS2.
        let mut old = 5_000u64.to_ne_bytes().to_vec();
        old.extend(u32s(&[50, 1, 2, 0, 0, 0, 700]));
        let bytes = qdisc_message(&[
            attr(TCA_KIND, b"netem\0"),
            attr(TCA_OPTIONS, &qopt),
            attr(TCA_STATS, &old),
        ]);
        let q = &parse_qdiscs(&bytes)[0];
        assert_eq!(q.delay_s, Some(0.010));
        assert_eq!((q.bytes, q.packets, q.drops), (5_000, 50, 1));
        assert_eq!((q.overlimits, q.backlog_bytes), (2, 700));
    }

    /// tbf's 64-bit rate attribute wins over the 32-bit one it overflows.
    #[test]
    fn a_tbf_rate_above_32_bits_comes_from_rate64() {
        let mut parms = vec![0u8; 36];
        parms[8..12].copy_from_slice(&u32::MAX.to_ne_bytes());
        let mut options = attr(TCA_TBF_PARMS, &parms);
        options.extend(attr(TCA_TBF_RATE64, &12_500_000_000u64.to_ne_bytes()));
        let bytes = qdisc_message(&[attr(TCA_KIND, b"tbf\0"), attr(TCA_OPTIONS, &options)]);
        assert_eq!(
            parse_qdiscs(&bytes)[0].rate_bytes_per_s,
            Some(12_500_000_000.0)
        );
    }

    /// Every prefix of a real dump, and the dump with bytes flipped, parse
    /// without a panic and never yield more qdiscs than the whole.
    #[test]
    fn truncated_or_corrupt_dumps_never_panic() {
        let whole = fixture("qdiscs.bin");
        let all = parse_qdiscs(&whole).len();
        for end in 0..whole.len() {
            assert!(parse_qdiscs(&whole[..end]).len() <= all);
        }
        for at in (0..whole.len()).step_by(3) {
            let mut bent = whole.clone();
            bent[at] ^= 0xa5;
            let _ = parse_qdiscs(&bent);
        }
        let links = fixture("links.bin");
        for end in (0..links.len()).step_by(7) {
            let _ = parse_link_names(&links[..end]);
        }
    }

    fn counters(handle: u32, bytes: u64, drops: u64) -> QdiscCounters {
        QdiscCounters {
            namespace: "server".to_string(),
            interface: "veth0".to_string(),
            handle,
            kind: "tbf".to_string(),
            bytes,
            packets: bytes / 1000,
            drops,
            overlimits: drops * 2,
            rate_bytes_per_s: Some(250_000.0),
            ..QdiscCounters::default()
        }
    }

    #[test]
    fn two_readings_give_rates_and_counts() {
        let a = [counters(0x8001_0000, 1_000_000, 5)];
        let b = [counters(0x8001_0000, 1_500_000, 12)];
        let s = QdiscSample::all_between(&a, &b, 2.0);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].bytes_per_s, 250_000.0);
        assert_eq!(s[0].packets_per_s, 250.0);
        assert_eq!(s[0].drops, 7);
        assert_eq!(s[0].overlimits, 14);
        assert_eq!(s[0].rate_bytes_per_s, Some(250_000.0));
        // A replaced qdisc (new handle) counts from zero; a namespace that
        // was not read before gives nothing.
        let c = [counters(0x8002_0000, 300_000, 0)];
        assert_eq!(
            QdiscSample::all_between(&a, &c, 1.0)[0].bytes_per_s,
            300_000.0
        );
        assert!(QdiscSample::all_between(&[], &c, 1.0).is_empty());
    }
}
