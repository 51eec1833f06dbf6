//! Which of the host's interfaces a run's traffic can leave by: the
//! kernel's route to each of the server's addresses, asked as `ip route
//! get` asks it (one `RTM_GETROUTE` request with `RTA_DST`, its reply's
//! `RTA_OIF`), named from a link dump. A loopback server's route is `lo`;
//! one in a namespace behind a veth pair, that pair's host end.
//!
//! The probe reads every link and qdisc of the host; a link this set
//! leaves out carries none of the run's traffic (another run's shaped
//! veth, an uplink under a loopback run), and its load is not the run's.
//! Formats from linux/rtnetlink.h (`rtmsg`, `RTA_DST`, `RTA_OIF`).

use super::netlink::{self, NetlinkError, RouteSocket};
use std::collections::BTreeSet;
use std::net::IpAddr;

/// `struct rtmsg`: family, dst_len, src_len, tos, table, protocol, scope,
/// type (a byte each) and flags (u32).
const RTMSG_LEN: usize = 12;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
/// `struct ifinfomsg`, the header of a link dump's request.
const IFINFOMSG_LEN: usize = 16;

/// The names of the interfaces the routes to `addrs` leave by (an empty
/// set for no address: a run that crosses no link).
pub(crate) fn interfaces_to(addrs: &[IpAddr]) -> Result<BTreeSet<String>, NetlinkError> {
    let mut out = BTreeSet::new();
    if addrs.is_empty() {
        return Ok(out);
    }
    let mut socket = RouteSocket::open()?;
    let names =
        super::qdisc::parse_link_names(&socket.dump(libc::RTM_GETLINK, &[0u8; IFINFOMSG_LEN])?);
    for addr in addrs {
        let reply = socket.get(libc::RTM_GETROUTE, &route_request(*addr))?;
        if let Some(index) = route_interface(&reply) {
            out.insert(
                names
                    .get(&index)
                    .cloned()
                    .unwrap_or_else(|| format!("if{index}")),
            );
        }
    }
    Ok(out)
}

/// An `rtmsg` for `addr`'s family with a whole-address `RTA_DST`.
fn route_request(addr: IpAddr) -> Vec<u8> {
    let addr = match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    };
    let (family, bytes) = match addr {
        IpAddr::V4(a) => (libc::AF_INET as u8, a.octets().to_vec()),
        IpAddr::V6(a) => (libc::AF_INET6 as u8, a.octets().to_vec()),
    };
    let mut out = vec![0u8; RTMSG_LEN];
    out[0] = family;
    out[1] = (bytes.len() * 8) as u8;
    let attr_len = 4 + bytes.len();
    out.extend_from_slice(&(attr_len as u16).to_ne_bytes());
    out.extend_from_slice(&RTA_DST.to_ne_bytes());
    out.extend_from_slice(&bytes);
    out
}

/// The output interface's index in an `RTM_NEWROUTE` reply; `None` for
/// another message or a route without one (a blackhole, unreachable).
fn route_interface(reply: &[u8]) -> Option<i32> {
    netlink::messages(reply)
        .filter(|m| m.kind == libc::RTM_NEWROUTE)
        .find_map(|m| {
            netlink::attributes(netlink::after_header(m.payload, RTMSG_LEN)?)
                .find(|(k, _)| *k == RTA_OIF)
                .and_then(|(_, v)| Some(i32::from_ne_bytes(v.get(..4)?.try_into().ok()?)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// One netlink message of `kind` holding `payload`.
    fn message(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(&[0u8; 10]);
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn a_request_asks_for_the_whole_address_in_its_family() {
        let v4 = route_request(IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3)));
        assert_eq!(v4[..2], [libc::AF_INET as u8, 32]);
        assert_eq!(v4[RTMSG_LEN..], [8, 0, 1, 0, 10, 1, 2, 3]);
        // An IPv4 address written as IPv6 is routed as IPv4.
        let mapped = route_request(IpAddr::V6(Ipv4Addr::new(10, 1, 2, 3).to_ipv6_mapped()));
        assert_eq!(mapped, v4);
        let v6 = route_request(IpAddr::V6(Ipv6Addr::LOCALHOST));
        assert_eq!(v6[..2], [libc::AF_INET6 as u8, 128]);
        assert_eq!(v6.len(), RTMSG_LEN + 4 + 16);
    }

    #[test]
    fn the_reply_gives_its_output_interface_and_garbage_gives_none() {
        let mut payload = vec![0u8; RTMSG_LEN];
        payload.extend_from_slice(&[8, 0, 1, 0, 127, 0, 0, 1]); // RTA_DST
        payload.extend_from_slice(&[8, 0, 4, 0]); // RTA_OIF
        payload.extend_from_slice(&7i32.to_ne_bytes());
        assert_eq!(
            route_interface(&message(libc::RTM_NEWROUTE, &payload)),
            Some(7)
        );
        // Another kind of message, a short header, a cut attribute.
        assert_eq!(route_interface(&message(libc::RTM_NEWLINK, &payload)), None);
        assert_eq!(route_interface(&message(libc::RTM_NEWROUTE, &[0; 5])), None);
        let cut = &payload[..payload.len() - 2];
        assert_eq!(route_interface(&message(libc::RTM_NEWROUTE, cut)), None);
        assert_eq!(route_interface(&[]), None);
    }

    #[test]
    fn loopback_addresses_leave_by_lo_and_no_address_by_nothing() {
        let v4 =
            interfaces_to(&[IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1))]).expect("route to 127.0.0.1");
        assert_eq!(v4, BTreeSet::from(["lo".to_string()]));
        let other = interfaces_to(&[IpAddr::V4(Ipv4Addr::new(127, 3, 4, 5))]).unwrap();
        assert_eq!(other, v4);
        assert!(interfaces_to(&[]).unwrap().is_empty());
    }
}
