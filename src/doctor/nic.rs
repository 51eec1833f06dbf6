//! Network interfaces and their interrupts: link state, actual speed and
//! duplex (/sys/class/net), the counters a duplex mismatch drives (late
//! collisions, collisions on a full-duplex link, CRC errors), carrier
//! changes, missed and dropped frames, ring buffers below their hardware
//! maximum (ethtool's ring parameters), one device's interrupts
//! concentrated on one CPU, irqbalance, receive packet steering and the
//! softnet backlog (/proc/net/softnet_stat). Interfaces are checked, and
//! advised on (link modes, rings, queues, steering), only when they are
//! physical NICs: those with a `/sys/class/net/DEV/device` link. Loopback,
//! veth, bridges, bonds, VLANs and tun/tap have none. MTUs are compared
//! along paths in `mtu.rs`.

use super::{shown, Finding, Report, Root, Severity};

/// The physical-looking interfaces: Ethernet (type 1), not loopback.
fn interfaces(root: &Root) -> Vec<String> {
    root.list("sys/class/net")
        .into_iter()
        .filter(|n| n != "lo" && root.number(&format!("sys/class/net/{n}/type")) == Some(1))
        .collect()
}

/// A NIC with hardware behind it: sysfs links `device` to its bus device
/// (PCI, USB, virtio); software interfaces have no such link.
fn is_physical(root: &Root, dev: &str) -> bool {
    root.path(&format!("sys/class/net/{dev}/device")).exists()
}

fn stat(root: &Root, dev: &str, name: &str) -> Option<i64> {
    root.number(&format!("sys/class/net/{dev}/statistics/{name}"))
}

/// Current and maximum receive ring: ethtool's ring parameters on a live
/// host; on a fixture, `ethtool/DEV/ring` holding `rx CURRENT MAX`.
pub(super) fn rx_ring(root: &Root, dev: &str) -> Option<(u32, u32)> {
    if root.live {
        return ethtool_rx_ring(dev);
    }
    let text = root.read(&format!("ethtool/{dev}/ring"))?;
    text.lines().find_map(|l| {
        let mut parts = l.split_whitespace();
        (parts.next()? == "rx").then_some(())?;
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    })
}

/// `ETHTOOL_GRINGPARAM` through `SIOCETHTOOL`.
fn ethtool_rx_ring(dev: &str) -> Option<(u32, u32)> {
    #[repr(C)]
    struct RingParam {
        cmd: u32,
        rx_max: u32,
        rx_mini_max: u32,
        rx_jumbo_max: u32,
        tx_max: u32,
        rx: u32,
        rx_mini: u32,
        rx_jumbo: u32,
        tx: u32,
    }
    let mut ring = RingParam {
        cmd: 0x10,
        rx_max: 0,
        rx_mini_max: 0,
        rx_jumbo_max: 0,
        tx_max: 0,
        rx: 0,
        rx_mini: 0,
        rx_jumbo: 0,
        tx: 0,
    };
    ethtool_ioctl(dev, (&mut ring as *mut RingParam).cast())?;
    (ring.rx_max > 0).then_some((ring.rx, ring.rx_max))
}

/// One `SIOCETHTOOL` request on `dev` with `data` (an ethtool command
/// structure whose first field names the command).
fn ethtool_ioctl(dev: &str, data: *mut libc::c_void) -> Option<()> {
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        data: *mut libc::c_void,
        _pad: [u8; 16],
    }
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    if dev.len() >= 16 {
        return None;
    }
    let mut req = IfReq {
        name: [0; 16],
        data,
        _pad: [0; 16],
    };
    req.name[..dev.len()].copy_from_slice(dev.as_bytes());
    // SAFETY: a datagram socket used only for this ioctl, closed below; the
    // request points at the caller's structure, which outlives the call.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        if fd < 0 {
            return None;
        }
        let rc = libc::ioctl(fd, SIOCETHTOOL as _, &mut req);
        libc::close(fd);
        (rc == 0).then_some(())
    }
}

/// Link modes as ethtool's legacy `ETHTOOL_GSET` reports them: bit →
/// (name, Mb/s). Only the twisted-pair modes are named here.
const MODES: [(u32, &str, u32); 7] = [
    (0, "10baseT/Half", 10),
    (1, "10baseT/Full", 10),
    (2, "100baseT/Half", 100),
    (3, "100baseT/Full", 100),
    (4, "1000baseT/Half", 1000),
    (5, "1000baseT/Full", 1000),
    (12, "10000baseT/Full", 10000),
];

/// Auto-negotiation and the modes this end and its partner advertise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LinkSettings {
    pub(crate) autoneg: bool,
    pub(crate) advertised: Vec<&'static str>,
    pub(crate) partner: Vec<&'static str>,
}

fn names(mask: u32) -> Vec<&'static str> {
    MODES
        .iter()
        .filter(|(bit, _, _)| mask & (1 << bit) != 0)
        .map(|(_, name, _)| *name)
        .collect()
}

/// The link settings: ethtool's ioctl on a live host; on a fixture,
/// `ethtool/DEV/settings` with lines `autoneg on|off`, `advertised MODES…`
/// and `partner MODES…`.
pub(super) fn link_settings(root: &Root, dev: &str) -> Option<LinkSettings> {
    if root.live {
        return ethtool_link_settings(dev);
    }
    let text = root.read(&format!("ethtool/{dev}/settings"))?;
    let modes = |key: &str| -> Vec<&'static str> {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|rest| {
                rest.split_whitespace()
                    .filter_map(|m| MODES.iter().find(|(_, n, _)| *n == m).map(|(_, n, _)| *n))
                    .collect()
            })
            .unwrap_or_default()
    };
    Some(LinkSettings {
        autoneg: text.lines().any(|l| l.trim() == "autoneg on"),
        advertised: modes("advertised"),
        partner: modes("partner"),
    })
}

/// `ETHTOOL_GSET` through `SIOCETHTOOL`.
fn ethtool_link_settings(dev: &str) -> Option<LinkSettings> {
    #[repr(C)]
    #[derive(Default)]
    struct Cmd {
        cmd: u32,
        supported: u32,
        advertising: u32,
        speed: u16,
        duplex: u8,
        port: u8,
        phy_address: u8,
        transceiver: u8,
        autoneg: u8,
        mdio_support: u8,
        maxtxpkt: u32,
        maxrxpkt: u32,
        speed_hi: u16,
        eth_tp_mdix: u8,
        eth_tp_mdix_ctrl: u8,
        lp_advertising: u32,
        reserved: [u32; 2],
    }
    let mut cmd = Cmd {
        cmd: 0x1,
        ..Cmd::default()
    };
    ethtool_ioctl(dev, (&mut cmd as *mut Cmd).cast())?;
    // A virtual NIC answers with nothing advertised: no settings to judge.
    (cmd.supported != 0).then(|| LinkSettings {
        autoneg: cmd.autoneg != 0,
        advertised: names(cmd.advertising),
        partner: names(cmd.lp_advertising),
    })
}

fn mode_speed(name: &str) -> u32 {
    MODES.iter().find(|(_, n, _)| *n == name).map_or(0, |m| m.2)
}

pub(crate) fn check(before: &Root, after: &Root, report: &mut Report) {
    for dev in &interfaces(after) {
        let base = format!("sys/class/net/{dev}");
        let operstate = after.read(&format!("{base}/operstate")).unwrap_or_default();
        if operstate != "up" {
            continue;
        }
        // A software interface has no wire: its speed, duplex, errors and
        // rings are the kernel's, and no ethtool setting changes them.
        if !is_physical(after, dev) {
            continue;
        }
        let (speed, duplex) = speed_and_duplex(after, dev, report);
        negotiation(after, dev, speed, report);
        collisions(after, dev, duplex.as_deref() == Some("full"), report);
        rising_errors(before, after, dev, report);
        receive_losses(after, dev, report);
        receive_ring(after, dev, report);
    }
}

/// The link's speed (Mb/s) and duplex; half duplex at 100 Mb/s and above
/// is a finding, a NIC that reports neither a gap.
fn speed_and_duplex(after: &Root, dev: &str, report: &mut Report) -> (Option<i64>, Option<String>) {
    let base = format!("sys/class/net/{dev}");
    let speed = after.number(&format!("{base}/speed")).filter(|s| *s > 0);
    let duplex = after.read(&format!("{base}/duplex"));
    match (speed, duplex.as_deref()) {
        (Some(s), Some("half")) if s >= 100 => report.add(Finding {
            severity: Severity::Critical,
            area: "network".to_string(),
            title: format!("{dev} runs at half duplex at {s} Mb/s"),
            evidence: vec![
                shown(&format!("/{base}/speed"), s),
                shown(&format!("/{base}/duplex"), "half"),
            ],
            why: "at half duplex the link cannot send and receive at once; against a full-duplex switch port it collides on every busy exchange, and throughput collapses while the latency tail grows (5,000 tps fell to 800 in one lab)".to_string(),
            fix: format!("ethtool -s {dev} speed {s} duplex full autoneg on (and set the switch port to auto-negotiate too)"),
        }),
        (None, _) => report.missing(format!("{dev}: no link speed or duplex (a virtual NIC reports none)")),
        _ => {}
    }
    (speed, duplex)
}

/// Auto-negotiation off, or a link trained below the best mode both ends
/// advertise.
fn negotiation(after: &Root, dev: &str, speed: Option<i64>, report: &mut Report) {
    let base = format!("sys/class/net/{dev}");
    let Some(link) = link_settings(after, dev) else {
        return;
    };
    if !link.autoneg {
        report.add(Finding {
            severity: Severity::Warning,
            area: "network".to_string(),
            title: format!("{dev} has auto-negotiation off"),
            evidence: vec![format!("ethtool {dev}: Auto-negotiation: off")],
            why: "a forced speed and duplex against an auto-negotiating peer is how duplex mismatches are made: the peer falls back to half duplex".to_string(),
            fix: format!("ethtool -s {dev} autoneg on (and on the switch port)"),
        });
    }
    let best = link
        .advertised
        .iter()
        .filter(|m| link.partner.contains(m))
        .map(|m| mode_speed(m))
        .max();
    if let (Some(best), Some(s)) = (best, speed) {
        if i64::from(best) > s {
            report.add(Finding {
                severity: Severity::Warning,
                area: "network".to_string(),
                title: format!("{dev} runs at {s} Mb/s though both ends can do {best} Mb/s"),
                evidence: vec![
                    shown(&format!("/{base}/speed"), s),
                    format!("ethtool {dev}: advertised {}", link.advertised.join(" ")),
                    format!("ethtool {dev}: link partner advertised {}", link.partner.join(" ")),
                ],
                why: "the link trained below the fastest mode both ends offer: a cable or port fault (a broken pair drops gigabit to 100 Mb/s)".to_string(),
                fix: format!("replace the cable, try another port, then ethtool -r {dev} to renegotiate"),
            });
        }
    }
}

/// Collisions on a full-duplex link (a duplex mismatch), or late
/// collisions on a half-duplex one.
fn collisions(after: &Root, dev: &str, full: bool, report: &mut Report) {
    let base = format!("sys/class/net/{dev}");
    let late = stat(after, dev, "tx_window_errors").unwrap_or(0);
    let collisions = stat(after, dev, "collisions").unwrap_or(0);
    if full && (late > 0 || collisions > 0) {
        report.add(Finding {
            severity: Severity::Critical,
            area: "network".to_string(),
            title: format!("{dev} is full duplex but counts collisions: a duplex mismatch"),
            evidence: vec![
                shown(&format!("/{base}/duplex"), "full"),
                shown(&format!("/{base}/statistics/collisions"), collisions),
                shown(&format!("/{base}/statistics/tx_window_errors"), late),
            ],
            why: "a full-duplex link never collides; late collisions mean the other end runs half duplex, and every one costs a retransmission and a stall".to_string(),
            fix: format!("make both ends agree: auto-negotiation on both (ethtool -s {dev} autoneg on), or the same forced speed and duplex on both"),
        });
    } else if late > 0 {
        report.add(Finding {
            severity: Severity::Warning,
            area: "network".to_string(),
            title: format!("{dev} counts late collisions"),
            evidence: vec![shown(&format!("/{base}/statistics/tx_window_errors"), late)],
            why: "late collisions on a half-duplex segment mean it is too long or overloaded, or the other end is full duplex".to_string(),
            fix: format!("check cabling and the peer's duplex; prefer full duplex (ethtool -s {dev} duplex full)"),
        });
    }
}

/// CRC errors and carrier changes that rose while sampling.
fn rising_errors(before: &Root, after: &Root, dev: &str, report: &mut Report) {
    let base = format!("sys/class/net/{dev}");
    let rising = |name: &str| {
        let (a, b) = (stat(before, dev, name)?, stat(after, dev, name)?);
        (b > a).then_some((a, b))
    };
    if let Some((a, b)) = rising("rx_crc_errors") {
        report.add(Finding {
            severity: Severity::Warning,
            area: "network".to_string(),
            title: format!("{dev}'s CRC errors are rising"),
            evidence: vec![format!("/{base}/statistics/rx_crc_errors: {a} → {b} while sampling")],
            why: "frames arrive damaged: a bad cable or port, or a duplex mismatch; each is lost and retransmitted by TCP after a timeout".to_string(),
            fix: format!("replace the cable or port; check duplex on both ends (ethtool {dev})"),
        });
    }
    if let (Some(a), Some(b)) = (
        before.number(&format!("{base}/carrier_changes")),
        after.number(&format!("{base}/carrier_changes")),
    ) {
        if b > a {
            report.add(Finding {
                severity: Severity::Warning,
                area: "network".to_string(),
                title: format!("{dev}'s link is flapping"),
                evidence: vec![format!("/{base}/carrier_changes: {a} → {b} while sampling")],
                why: "each carrier loss drops traffic and renegotiates the link".to_string(),
                fix: "check the cable, the switch port and power saving (ethtool --show-eee)"
                    .to_string(),
            });
        }
    }
}

/// Frames the NIC missed (ring overrun), else packets the stack dropped.
fn receive_losses(after: &Root, dev: &str, report: &mut Report) {
    let base = format!("sys/class/net/{dev}");
    let missed = stat(after, dev, "rx_missed_errors").unwrap_or(0);
    let dropped = stat(after, dev, "rx_dropped").unwrap_or(0);
    if missed > 0 {
        report.add(Finding {
            severity: Severity::Warning,
            area: "network".to_string(),
            title: format!("{dev} missed {missed} frames (receive ring overrun)"),
            evidence: vec![shown(&format!("/{base}/statistics/rx_missed_errors"), missed)],
            why: "the NIC had nowhere to put arriving frames: the ring was full because the host did not drain it fast enough".to_string(),
            fix: format!("raise the ring (ethtool -G {dev} rx MAX) and spread its interrupts"),
        });
    } else if dropped > 0 {
        report.add(Finding {
            severity: Severity::Info,
            area: "network".to_string(),
            title: format!("{dev} dropped {dropped} received packets"),
            evidence: vec![shown(&format!("/{base}/statistics/rx_dropped"), dropped)],
            why: "packets the stack discarded (unknown protocol, full backlog); usually harmless unless rising under load".to_string(),
            fix: "watch it during a run (perflab watch)".to_string(),
        });
    }
}

/// A receive ring below its hardware maximum.
fn receive_ring(after: &Root, dev: &str, report: &mut Report) {
    match rx_ring(after, dev) {
        Some((current, max)) if current < max => report.add(Finding {
            severity: Severity::Warning,
            area: "network".to_string(),
            title: format!("{dev}'s receive ring is {current} of a possible {max}"),
            evidence: vec![format!("ethtool -g {dev}: rx {current}, maximum {max}")],
            why: "a short ring overflows under bursts and drops frames; the labs raised buffers to their maximum before testing".to_string(),
            fix: format!("ethtool -G {dev} rx {max}"),
        }),
        Some(_) => {}
        None => report.missing(format!("{dev}: no ring buffer sizes (the driver does not report them)")),
    }
}

/// Interrupts per device concentrated on one CPU, irqbalance, RPS and the
/// softnet backlog.
pub(crate) fn interrupts(root: &Root, report: &mut Report) {
    let cpus = root
        .read("proc/stat")
        .map(|t| {
            t.lines()
                .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
                .count()
        })
        .unwrap_or(0);
    let Some(text) = root.read("proc/interrupts") else {
        report.missing("/proc/interrupts");
        return;
    };
    let irqbalance = root.list("proc").iter().any(|pid| {
        pid.chars().all(|c| c.is_ascii_digit())
            && root.read(&format!("proc/{pid}/comm")).as_deref() == Some("irqbalance")
    });
    let concentrated = concentrated_interrupts(&text, report);
    if !irqbalance && cpus > 1 {
        report.add(Finding {
            severity: if concentrated { Severity::Warning } else { Severity::Info },
            area: "interrupts".to_string(),
            title: "irqbalance is not running".to_string(),
            evidence: vec!["no process named irqbalance in /proc".to_string()],
            why: "nothing spreads device interrupts over the CPUs; they stay where the kernel first put them".to_string(),
            fix: "apt-get install irqbalance && systemctl enable --now irqbalance".to_string(),
        });
    }
    packet_steering(root, cpus, report);
    softnet_backlog(root, report);
}

/// Devices with 90% or more of 10,000+ interrupts on one CPU; true when
/// there was one.
fn concentrated_interrupts(text: &str, report: &mut Report) -> bool {
    let mut concentrated = false;
    for (source, counts) in crate::probe::counters::interrupts_by_source(text) {
        // Numbered sources are devices; LOC, RES and the like are the CPU's own.
        if !source.chars().next().is_some_and(|c| c.is_ascii_digit()) || counts.len() < 2 {
            continue;
        }
        let total: u64 = counts.iter().sum();
        let (top_cpu, top) = counts
            .iter()
            .enumerate()
            .max_by_key(|(_, n)| **n)
            .map(|(i, n)| (i, *n))
            .unwrap_or((0, 0));
        if total >= 10_000 && top as f64 >= 0.9 * total as f64 {
            concentrated = true;
            report.add(Finding {
                severity: Severity::Warning,
                area: "interrupts".to_string(),
                title: format!(
                    "{source}: {:.0}% of its interrupts on CPU{top_cpu}",
                    top as f64 / total as f64 * 100.0
                ),
                evidence: vec![format!(
                    "/proc/interrupts {source}: {}",
                    counts
                        .iter()
                        .enumerate()
                        .map(|(i, n)| format!("CPU{i} {n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )],
                why: "one CPU services every interrupt of the device while the others idle: under load it saturates in interrupt handling (%ISR) first, as one lab saw at 40% of a CPU".to_string(),
                fix: format!(
                    "spread it: start irqbalance, or set /proc/irq/{}/smp_affinity_list, and use several queues (ethtool -L)",
                    source.split(':').next().unwrap_or("N")
                ),
            });
        }
    }
    concentrated
}

/// Physical NICs that are up with fewer receive queues than CPUs and no
/// receive packet steering.
fn packet_steering(root: &Root, cpus: usize, report: &mut Report) {
    for dev in interfaces(root)
        .into_iter()
        .filter(|d| is_physical(root, d))
    {
        if root
            .read(&format!("sys/class/net/{dev}/operstate"))
            .as_deref()
            != Some("up")
        {
            continue;
        }
        let queues = root.list(&format!("sys/class/net/{dev}/queues"));
        let rx: Vec<&String> = queues.iter().filter(|q| q.starts_with("rx-")).collect();
        if rx.is_empty() || cpus < 2 || rx.len() >= cpus {
            continue;
        }
        let steered = rx.iter().any(|q| {
            root.read(&format!("sys/class/net/{dev}/queues/{q}/rps_cpus"))
                .is_some_and(|m| m.chars().any(|c| c != '0' && c != ','))
        });
        if !steered {
            report.add(Finding {
                severity: Severity::Info,
                area: "interrupts".to_string(),
                title: format!("{dev} has {} receive queue(s) for {cpus} CPUs and no packet steering", rx.len()),
                evidence: vec![format!("/sys/class/net/{dev}/queues: {} rx queue(s), rps_cpus all 0", rx.len())],
                why: "receive processing for the device runs on as many CPUs as it has queues".to_string(),
                fix: format!("more queues (ethtool -L {dev} combined {cpus}) or RPS (echo MASK > /sys/class/net/{dev}/queues/rx-0/rps_cpus)"),
            });
        }
    }
}

/// Packets the softnet backlog dropped, and receive polls that ran out of
/// budget (/proc/net/softnet_stat, hexadecimal columns per CPU).
fn softnet_backlog(root: &Root, report: &mut Report) {
    if let Some(text) = root.read("proc/net/softnet_stat") {
        let (mut dropped, mut squeezed) = (0u64, 0u64);
        for line in text.lines() {
            let cols: Vec<u64> = line
                .split_whitespace()
                .filter_map(|c| u64::from_str_radix(c, 16).ok())
                .collect();
            dropped += cols.get(1).copied().unwrap_or(0);
            squeezed += cols.get(2).copied().unwrap_or(0);
        }
        if dropped > 0 {
            report.add(Finding {
                severity: Severity::Warning,
                area: "interrupts".to_string(),
                title: format!("the softnet backlog dropped {dropped} packets"),
                evidence: vec![shown("/proc/net/softnet_stat column 2 (summed)", dropped)],
                why: "packets arrived faster than the CPUs' receive processing drained the backlog".to_string(),
                fix: "raise net.core.netdev_max_backlog and spread receive processing (RPS, more queues)".to_string(),
            });
        }
        if squeezed > 0 {
            report.add(Finding {
                severity: Severity::Info,
                area: "interrupts".to_string(),
                title: format!("receive processing ran out of budget {squeezed} times"),
                evidence: vec![shown("/proc/net/softnet_stat column 3 (summed)", squeezed)],
                why: "the kernel's per-poll budget was used up with packets waiting (time_squeeze)"
                    .to_string(),
                fix: "raise net.core.netdev_budget if it rises during a run".to_string(),
            });
        }
    }
}
