//! The link between perflab and a server it manages, shaped for a lab
//! (`--link-rate`, `--link-loss`, `--link-delay`): the server runs in a
//! network namespace of its own, reached through a veth pair whose two
//! ends hold a token bucket filter at the rate (tc-tbf(8), as a serial
//! line or a slow LAN), drop packets at random in either
//! direction (nftables `numgen random` in the namespace, which is what
//! iptables' `statistic --mode random` match becomes under iptables-nft),
//! and delay them with netem where the kernel has it (tc-netem(8); where
//! it has not, one line says so).
//!
//! perflab's own sockets stay in the host's namespace, so its TCP
//! retransmits of the packets dropped toward the server are counted by the
//! host probe as they would be for a remote server; the host probe reads
//! the qdiscs of the server's namespace through its process.
//! Each part is written in the server's [`Leftovers`] before it is made.

use super::ledger::{run_ip, run_tool, Leftovers, Part};
use crate::error::PlanError;
use crate::units::{format_duration, BitsPerSec, Percent};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The shaper's queue, as time at the rate (tbf `latency`): long enough to
/// absorb a burst of replies, short enough that the rate is the limit.
const TBF_LATENCY: &str = "50ms";
/// The longest delay taken each way.
const MAX_DELAY: Duration = Duration::from_secs(10);

/// How the link to a managed server is shaped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkShape {
    /// The rate each way; `None` is the veth's own (unshaped).
    pub(crate) rate: Option<BitsPerSec>,
    /// The share of packets dropped on their way to the server (0 to 1).
    pub(crate) loss_to_server: f64,
    /// The share of packets dropped on their way from it (0 to 1).
    pub(crate) loss_from_server: f64,
    /// The delay added each way.
    pub(crate) delay: Option<Duration>,
}

impl LinkShape {
    /// Reads the three flags; `None` when none is given (no namespace).
    pub(crate) fn from_flags(
        rate: Option<&str>,
        loss: Option<&str>,
        delay: Option<&str>,
    ) -> Result<Option<LinkShape>, PlanError> {
        if rate.is_none() && loss.is_none() && delay.is_none() {
            return Ok(None);
        }
        let rate = match rate.map(str::trim) {
            None | Some("unlimited") => None,
            Some(text) => Some(BitsPerSec::parse(text).map_err(|e| {
                PlanError::flag("--link-rate", e, "e.g. --link-rate 1mbit, or unlimited")
            })?),
        };
        let (loss_to_server, loss_from_server) = match loss {
            None => (0.0, 0.0),
            Some(text) => {
                let bad = |e: String| {
                    PlanError::flag(
                        "--link-loss",
                        e,
                        "give one share for both ways (2%) or toward:from the server (2%:0%)",
                    )
                };
                let share = |t: &str| {
                    crate::units::parse_percent(t)
                        .map_err(|e| bad(e.to_string()))
                        .and_then(|p| match p < 0.5 {
                            true => Ok(p),
                            false => Err(bad(format!(
                                "{} of the packets lost leaves no connection standing",
                                t.trim()
                            ))),
                        })
                };
                match text.split_once(':') {
                    Some((to, from)) => (share(to)?, share(from)?),
                    None => {
                        let both = share(text)?;
                        (both, both)
                    }
                }
            }
        };
        let delay = delay
            .map(|text| {
                crate::units::parse_duration(text)
                    .map_err(|e| PlanError::flag("--link-delay", e, "e.g. --link-delay 5ms"))
                    .and_then(|d| match d <= MAX_DELAY {
                        true => Ok(d),
                        false => Err(PlanError::flag(
                            "--link-delay",
                            format!("{} is longer than a link's delay", text.trim()),
                            "give 10s or less",
                        )),
                    })
            })
            .transpose()?
            .filter(|d| !d.is_zero());
        Ok(Some(LinkShape {
            rate,
            loss_to_server,
            loss_from_server,
            delay,
        }))
    }

    /// What the link is, in words: `1mbit each way, 2.0% lost toward the
    /// server`.
    pub(crate) fn describe(&self) -> String {
        let mut parts = vec![match self.rate {
            Some(rate) => format!("{rate} each way"),
            None => "unshaped".to_string(),
        }];
        if self.loss_to_server > 0.0 {
            parts.push(format!(
                "{} lost toward the server",
                Percent(self.loss_to_server)
            ));
        }
        if self.loss_from_server > 0.0 {
            parts.push(format!("{} lost from it", Percent(self.loss_from_server)));
        }
        if let Some(delay) = self.delay {
            parts.push(format!("{} delay each way", format_duration(delay)));
        }
        parts.join(", ")
    }

    /// The token bucket each end holds: its rate, and a bucket of at least
    /// 8 KiB (a few full frames) or 10 ms at the rate, whichever is larger
    /// (tbf needs a bucket of rate/HZ at least).
    fn tbf_args(rate: BitsPerSec) -> Vec<String> {
        let burst = (rate.0 / 8 / 100).max(8 * 1024);
        vec![
            "tbf".into(),
            "rate".into(),
            format!("{}bit", rate.0),
            "burst".into(),
            burst.to_string(),
            "latency".into(),
            TBF_LATENCY.into(),
        ]
    }

    /// The nftables rules that drop packets on `interface` (the server's
    /// end) at random, in tenths of a thousandth: a table of its own in the
    /// server's namespace.
    fn loss_rules(&self, interface: &str) -> Option<String> {
        let rule = |hook: &str, dir: &str, share: f64| {
            let per_100k = (share * 100_000.0).round() as u64;
            (per_100k > 0).then(|| {
                format!(
                    "  chain {hook} {{ type filter hook {hook} priority 0; policy accept; {dir} \"{interface}\" numgen random mod 100000 < {per_100k} counter drop; }}\n"
                )
            })
        };
        let chains: String = [
            rule("input", "iifname", self.loss_to_server),
            rule("output", "oifname", self.loss_from_server),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!chains.is_empty()).then(|| format!("table inet perflab_link {{\n{chains}}}\n"))
    }
}

/// A network namespace for one server, joined to the host by a shaped
/// veth pair: the host end has [`ServerLink::host_addr`], the server's
/// [`ServerLink::server_addr`]. Deleted on drop (the pair, its qdiscs and
/// the namespace's rules go with it).
pub(crate) struct ServerLink {
    name: String,
    host_if: String,
    /// The server's end of the pair, in the namespace.
    server_if: String,
    /// The namespace, open, for the server to join between fork and exec.
    namespace: std::fs::File,
    /// The host's end of the veth pair.
    pub(crate) host_addr: Ipv4Addr,
    /// The server's end, the address it listens on.
    pub(crate) server_addr: Ipv4Addr,
    /// How it is shaped.
    pub(crate) shape: LinkShape,
}

/// Checks that a link can be shaped here (root, `ip`, `tc`, and `nft` for
/// loss), before anything is made.
pub(crate) fn check_can_shape(shape: &LinkShape) -> Result<(), PlanError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(PlanError::flag(
            "--link-rate",
            "a shaped link is a network namespace, a veth pair and qdiscs, which only root can make",
            "run perflab as root, or drop the --link-* flags",
        ));
    }
    let mut tools = vec![("ip", "iproute2"), ("tc", "iproute2")];
    if shape.loss_to_server > 0.0 || shape.loss_from_server > 0.0 {
        tools.push(("nft", "nftables"));
    }
    for (tool, package) in tools {
        let found = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
            .iter()
            .any(|d| std::path::Path::new(d).join(tool).is_file());
        if !found {
            return Err(PlanError::new(format!(
                "a shaped link needs the program {tool}, which is not installed; apt-get install {package}"
            )));
        }
    }
    Ok(())
}

impl ServerLink {
    /// Makes the namespace, the pair and its shaping, each written in
    /// `leftovers` first.
    pub(crate) fn create(
        shape: &LinkShape,
        leftovers: &mut Leftovers,
    ) -> anyhow::Result<ServerLink> {
        check_can_shape(shape)?;
        static MADE: AtomicUsize = AtomicUsize::new(0);
        let pid = std::process::id();
        let k = MADE.fetch_add(1, Ordering::Relaxed);
        let name = format!("perflab-link-{pid}-{k}");
        // Interface names hold 15 bytes: `pl` + pid + `x` + k + end.
        let host_if = format!("pl{pid}x{}h", k % 100);
        let server_if = format!("pl{pid}x{}s", k % 100);
        let (host_addr, server_addr) = free_subnet(pid as usize * 7 + k)?;
        leftovers.add(Part::Netns { name: name.clone() })?;
        let made = |step: Result<(), String>| {
            step.map_err(|e| anyhow::anyhow!("cannot shape the server's link: {e}"))
        };
        made(run_ip(&["netns", "add", &name]))?;
        // From here on a failure removes what was made: the value drops.
        let namespace = std::fs::File::open(format!("/run/netns/{name}"))
            .with_context(|| format!("cannot open the network namespace {name}"));
        let namespace = match namespace {
            Ok(file) => file,
            Err(e) => {
                let _ = run_ip(&["netns", "del", &name]);
                return Err(e);
            }
        };
        let link = ServerLink {
            name,
            host_if,
            server_if,
            namespace,
            host_addr,
            server_addr,
            shape: shape.clone(),
        };
        leftovers.add(Part::Veth {
            name: link.host_if.clone(),
        })?;
        let ns = link.name.as_str();
        let (h, s) = (link.host_if.as_str(), link.server_if.as_str());
        let host_cidr = format!("{host_addr}/30");
        let server_cidr = format!("{server_addr}/30");
        made(run_ip(&[
            "link", "add", h, "type", "veth", "peer", "name", s,
        ]))?;
        made(run_ip(&["link", "set", s, "netns", ns]))?;
        made(run_ip(&["addr", "add", &host_cidr, "dev", h]))?;
        made(run_ip(&["link", "set", h, "up"]))?;
        for args in [
            vec!["addr", "add", server_cidr.as_str(), "dev", s],
            vec!["link", "set", s, "up"],
            vec!["link", "set", "lo", "up"],
        ] {
            let mut all = vec!["netns", "exec", ns, "ip"];
            all.extend(args);
            made(run_ip(&all))?;
        }
        link.hold_shape(true)?;
        Ok(link)
    }

    /// Whether the link is shaped at all (a rate, a delay or a loss): an
    /// `unlimited` link with nothing else is the veth as it is.
    pub(crate) fn is_shaped(&self) -> bool {
        let s = &self.shape;
        s.rate.is_some() || s.delay.is_some() || s.loss_to_server > 0.0 || s.loss_from_server > 0.0
    }

    /// Puts the link's shaping on (`held`: its rate and delay on both
    /// ends, its loss rules in the namespace) or takes it off, leaving the
    /// veth as fast as the host: a run's data are prepared on the bare
    /// link and measured on the shaped one.
    pub(crate) fn hold_shape(&self, held: bool) -> anyhow::Result<()> {
        let (ns, h, s) = (
            self.name.as_str(),
            self.host_if.as_str(),
            self.server_if.as_str(),
        );
        let rules = self.shape.loss_rules(s);
        let step = |done: Result<(), String>| {
            done.map_err(|e| anyhow::anyhow!("cannot shape the server's link: {e}"))
        };
        if held {
            for (inside, dev) in [(false, h), (true, s)] {
                self.shape_end(inside, dev)?;
            }
            if let Some(rules) = rules {
                step(run_tool(
                    "ip",
                    &["netns", "exec", ns, "nft", "-f", "-"],
                    Some(&rules),
                ))?;
            }
            return Ok(());
        }
        if self.shape.rate.is_some() || self.shape.delay.is_some() {
            step(run_tool("tc", &["qdisc", "del", "dev", h, "root"], None))?;
            step(run_ip(&[
                "netns", "exec", ns, "tc", "qdisc", "del", "dev", s, "root",
            ]))?;
        }
        if rules.is_some() {
            step(run_ip(&[
                "netns",
                "exec",
                ns,
                "nft",
                "delete",
                "table",
                "inet",
                "perflab_link",
            ]))?;
        }
        Ok(())
    }

    /// Puts the rate and the delay on one end's egress (`inside`: the
    /// server's end, in its namespace).
    fn shape_end(&self, inside: bool, dev: &str) -> anyhow::Result<()> {
        let tc = |args: Vec<String>| {
            let mut all: Vec<String> = Vec::new();
            if inside {
                all.extend(["netns", "exec", &self.name, "tc"].map(String::from));
                all.extend(args);
                run_tool(
                    "ip",
                    &all.iter().map(String::as_str).collect::<Vec<_>>(),
                    None,
                )
            } else {
                run_tool(
                    "tc",
                    &args.iter().map(String::as_str).collect::<Vec<_>>(),
                    None,
                )
            }
        };
        let base = |rest: &[&str]| {
            let mut v: Vec<String> = ["qdisc", "add", "dev", dev].map(String::from).to_vec();
            v.extend(rest.iter().map(|s| s.to_string()));
            v
        };
        match (self.shape.delay, self.shape.rate) {
            (None, None) => Ok(()),
            (None, Some(rate)) => {
                let mut args = base(&["root"]);
                args.extend(LinkShape::tbf_args(rate));
                tc(args).map_err(|e| anyhow::anyhow!("cannot shape the server's link: {e}"))
            }
            (Some(delay), rate) => {
                let delay = format!("{}us", delay.as_micros());
                tc(base(&["root", "handle", "1:", "netem", "delay", &delay])).map_err(|e| {
                    PlanError::flag(
                        "--link-delay",
                        format!(
                            "this kernel does not take the netem qdisc that delays packets ({e})"
                        ),
                        "run on a kernel built with sch_netem, or drop --link-delay",
                    )
                })?;
                if let Some(rate) = rate {
                    let mut args = base(&["parent", "1:1", "handle", "2:"]);
                    args.extend(LinkShape::tbf_args(rate));
                    tc(args).map_err(|e| anyhow::anyhow!("cannot shape the server's link: {e}"))?;
                }
                Ok(())
            }
        }
    }

    /// The namespace's file descriptor, for [`super::Placement`].
    pub(crate) fn namespace_fd(&self) -> RawFd {
        self.namespace.as_raw_fd()
    }

    /// The namespace's name (`ip netns`).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The host's end of the pair.
    pub(crate) fn host_interface(&self) -> &str {
        &self.host_if
    }
}

impl Drop for ServerLink {
    fn drop(&mut self) {
        // Deleting the namespace takes the server's end, and with it the
        // pair, its qdiscs and the namespace's rules; the host's end is
        // deleted after in case something still held the namespace.
        let _ = run_ip(&["netns", "del", &self.name]);
        if std::path::Path::new("/sys/class/net")
            .join(&self.host_if)
            .exists()
        {
            let _ = run_ip(&["link", "del", &self.host_if]);
        }
    }
}

/// A /30 of 10.215.0.0/16 that no interface of the host has an address
/// in, starting the search at `seed`: the host's end and the server's.
fn free_subnet(seed: usize) -> anyhow::Result<(Ipv4Addr, Ipv4Addr)> {
    let taken = std::fs::read_to_string("/proc/net/fib_trie").unwrap_or_default();
    for i in 0..16_384 {
        let block = ((seed + i) % 16_384) as u32 * 4;
        let net = u32::from(Ipv4Addr::new(10, 215, 0, 0)) + block;
        let host = Ipv4Addr::from(net + 1);
        let server = Ipv4Addr::from(net + 2);
        let network = Ipv4Addr::from(net);
        let used = [network, host, server]
            .iter()
            .any(|a| taken.contains(&format!(" {a}\n")));
        if !used {
            return Ok((host, server));
        }
    }
    anyhow::bail!("no free /30 is left in 10.215.0.0/16 for the server's link")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(rate: Option<&str>, loss: Option<&str>, delay: Option<&str>) -> LinkShape {
        LinkShape::from_flags(rate, loss, delay).unwrap().unwrap()
    }

    #[test]
    fn the_flags_read_into_a_shape() {
        assert_eq!(LinkShape::from_flags(None, None, None).unwrap(), None);
        let s = shape(Some("1mbit"), Some("2%"), None);
        assert_eq!(s.rate, Some(BitsPerSec(1_000_000)));
        assert_eq!((s.loss_to_server, s.loss_from_server), (0.02, 0.02));
        assert_eq!(
            s.describe(),
            "1mbit each way, 2.0% lost toward the server, 2.0% lost from it"
        );
        let s = shape(Some("unlimited"), Some("1%:0%"), Some("5ms"));
        assert_eq!(s.rate, None);
        assert_eq!((s.loss_to_server, s.loss_from_server), (0.01, 0.0));
        assert_eq!(s.delay, Some(Duration::from_millis(5)));
        assert_eq!(
            s.describe(),
            "unshaped, 1.0% lost toward the server, 5ms delay each way"
        );
        for (rate, loss, delay, flag) in [
            (Some("fast"), None, None, "--link-rate"),
            (None, Some("2"), None, "--link-loss"),
            (None, Some("60%"), None, "--link-loss"),
            (None, Some("1%:x"), None, "--link-loss"),
            (None, None, Some("1h"), "--link-delay"),
            (None, None, Some("soon"), "--link-delay"),
        ] {
            let e = LinkShape::from_flags(rate, loss, delay)
                .unwrap_err()
                .to_string();
            assert!(e.contains(flag), "{e}");
        }
    }

    #[test]
    fn the_bucket_holds_a_few_frames_or_ten_milliseconds() {
        let args = LinkShape::tbf_args(BitsPerSec(1_000_000));
        assert_eq!(
            args.join(" "),
            "tbf rate 1000000bit burst 8192 latency 50ms"
        );
        let args = LinkShape::tbf_args(BitsPerSec(1_000_000_000));
        assert!(args.join(" ").contains("burst 1250000 "), "{args:?}");
    }

    #[test]
    fn loss_is_a_rule_per_direction_on_the_servers_end() {
        let rules = shape(None, Some("2%:0.5%"), None)
            .loss_rules("pl1x0s")
            .unwrap();
        assert!(rules.contains("hook input priority 0; policy accept; iifname \"pl1x0s\" numgen random mod 100000 < 2000 counter drop"), "{rules}");
        assert!(
            rules.contains("oifname \"pl1x0s\" numgen random mod 100000 < 500 counter drop"),
            "{rules}"
        );
        let one_way = shape(None, Some("1%:0%"), None).loss_rules("x").unwrap();
        assert!(!one_way.contains("output"), "{one_way}");
        assert_eq!(shape(Some("1mbit"), None, None).loss_rules("x"), None);
    }
}
