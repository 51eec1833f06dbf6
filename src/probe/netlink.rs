//! A small rtnetlink client: dumps (`NLM_F_DUMP`) and single requests (a
//! route) over a `NETLINK_ROUTE` socket, and iterators over the messages
//! and attributes of the reply.
//! Formats from the kernel's uapi headers (linux/netlink.h: `nlmsghdr`,
//! `nlattr`, 4-byte alignment) and netlink(7), rtnetlink(7).
//!
//! A netlink socket belongs to the network namespace of the thread that
//! created it, for its whole life: [`RouteSocket::open_in_namespace`] makes
//! one from a short-lived thread that entered another namespace with
//! setns(2), and the socket is then used from anywhere.
//!
//! Replies are bounded ([`MAX_DUMP_BYTES`]) and a receive times out, so a
//! misbehaving kernel or namespace cannot make the probe grow or hang; the
//! iterators stop at the first malformed length instead of panicking.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

/// The most bytes one dump may return; beyond it the dump is an error.
pub(crate) const MAX_DUMP_BYTES: usize = 4 << 20;

const NLMSG_HDRLEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
/// Attribute type bits (the top two are the nested and byte-order flags).
const NLA_TYPE_MASK: u16 = 0x3fff;
/// How long one receive may wait for the kernel.
const RECEIVE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a dump failed.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    #[error("netlink socket: {0} (is this a Linux host with rtnetlink?)")]
    Socket(#[source] io::Error),
    #[error("netlink dump: {0}")]
    Io(#[source] io::Error),
    #[error("netlink dump: the kernel answered error {0}")]
    Kernel(io::Error),
    #[error("netlink dump larger than 4 MiB: refused (is something flooding the namespace with qdiscs?)")]
    TooLarge,
    #[error("netlink dump: a reply did not fit the receive buffer")]
    Truncated,
    #[error("cannot enter the network namespace {path}: {source} (perflab needs root or CAP_SYS_ADMIN to read another namespace's qdiscs)")]
    Namespace {
        path: String,
        #[source]
        source: io::Error,
    },
}

/// A `NETLINK_ROUTE` socket in the namespace it was created in.
#[derive(Debug)]
pub struct RouteSocket {
    fd: OwnedFd,
    seq: u32,
}

impl RouteSocket {
    /// A socket in the calling thread's network namespace.
    pub(crate) fn open() -> Result<Self, NetlinkError> {
        // SAFETY: socket(2) takes plain integers; the result is checked.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(NetlinkError::Socket(io::Error::last_os_error()));
        }
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let timeout = libc::timeval {
            tv_sec: RECEIVE_TIMEOUT.as_secs() as libc::time_t,
            tv_usec: 0,
        };
        // SAFETY: the option value points at a timeval of the size given.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                std::ptr::addr_of!(timeout).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(NetlinkError::Socket(io::Error::last_os_error()));
        }
        Ok(RouteSocket { fd, seq: 0 })
    }

    /// A socket in the network namespace at `ns_path` (`/proc/PID/ns/net`),
    /// made by a thread that enters it and ends; this process's own
    /// threads stay where they are.
    pub fn open_in_namespace(ns_path: &Path) -> Result<Self, NetlinkError> {
        let namespace_error = |source| NetlinkError::Namespace {
            path: ns_path.display().to_string(),
            source,
        };
        let ns = std::fs::File::open(ns_path).map_err(namespace_error)?;
        let thread = std::thread::Builder::new()
            .name("perflab-netns".to_string())
            .spawn(move || {
                // SAFETY: setns(2) on an open namespace file; it moves only
                // this thread, which ends right after making the socket.
                if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(RouteSocket::open())
            })
            .map_err(namespace_error)?;
        match thread.join() {
            Ok(Ok(socket)) => socket,
            Ok(Err(e)) => Err(namespace_error(e)),
            Err(_) => Err(namespace_error(io::Error::other("the thread panicked"))),
        }
    }

    /// Dumps every object of a kind: sends `msg_type` with `NLM_F_DUMP`
    /// and the family header `header` (a `tcmsg`, an `ifinfomsg`), and
    /// returns the reply's messages, back to back, without the final
    /// `NLMSG_DONE`.
    pub fn dump(&mut self, msg_type: u16, header: &[u8]) -> Result<Vec<u8>, NetlinkError> {
        self.exchange(msg_type, NLM_F_REQUEST | NLM_F_DUMP, header)
    }

    /// Asks for one object: sends `msg_type` with `request` (a family
    /// header and its attributes, an `rtmsg` with `RTA_DST` for a route)
    /// and returns the kernel's one reply message.
    pub(crate) fn get(&mut self, msg_type: u16, request: &[u8]) -> Result<Vec<u8>, NetlinkError> {
        self.exchange(msg_type, NLM_F_REQUEST, request)
    }

    /// Sends one request and gathers its reply: up to `NLMSG_DONE` for a
    /// dump, its first message otherwise.
    fn exchange(
        &mut self,
        msg_type: u16,
        flags: u16,
        body: &[u8],
    ) -> Result<Vec<u8>, NetlinkError> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let len = NLMSG_HDRLEN + body.len();
        let mut request = Vec::with_capacity(len);
        request.extend_from_slice(&(len as u32).to_ne_bytes());
        request.extend_from_slice(&msg_type.to_ne_bytes());
        request.extend_from_slice(&flags.to_ne_bytes());
        request.extend_from_slice(&seq.to_ne_bytes());
        request.extend_from_slice(&0u32.to_ne_bytes());
        request.extend_from_slice(body);
        // SAFETY: an all-zero sockaddr_nl is valid; nl_pid 0 is the kernel.
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: the buffer and address are valid for the lengths given.
        let sent = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                request.as_ptr().cast(),
                request.len(),
                0,
                std::ptr::addr_of!(kernel).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            return Err(NetlinkError::Io(io::Error::last_os_error()));
        }
        self.replies(seq, flags & NLM_F_DUMP == NLM_F_DUMP)
    }

    /// The reply to request `seq`: its messages up to `NLMSG_DONE` for a
    /// `dump`, its first message otherwise.
    fn replies(&mut self, seq: u32, dump: bool) -> Result<Vec<u8>, NetlinkError> {
        // The kernel fills a dump's datagrams up to the reader's buffer size
        // (at least a page, 32 KiB by default): 64 KiB always holds one.
        let mut buf = vec![0u8; 64 << 10];
        let mut out = Vec::new();
        loop {
            // SAFETY: buf is valid for its length; MSG_TRUNC makes the
            // return value the datagram's full length, to detect truncation.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_TRUNC,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(NetlinkError::Io(e));
            }
            let n = n as usize;
            if n > buf.len() {
                return Err(NetlinkError::Truncated);
            }
            for message in messages(&buf[..n]) {
                if message.seq != seq {
                    // A reply to an earlier, abandoned request.
                    continue;
                }
                match message.kind {
                    NLMSG_DONE => return Ok(out),
                    NLMSG_ERROR => {
                        let code = message
                            .payload
                            .get(..4)
                            .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                        if code != 0 {
                            return Err(NetlinkError::Kernel(io::Error::from_raw_os_error(-code)));
                        }
                    }
                    _ => {
                        if out.len() + message.raw.len() > MAX_DUMP_BYTES {
                            return Err(NetlinkError::TooLarge);
                        }
                        out.extend_from_slice(message.raw);
                        if !dump {
                            return Ok(out);
                        }
                    }
                }
            }
        }
    }
}

/// One netlink message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Message<'a> {
    /// `nlmsg_type`: `RTM_NEWQDISC`, `RTM_NEWLINK`, `NLMSG_DONE`, …
    pub(crate) kind: u16,
    pub(crate) seq: u32,
    /// What follows the header (the family header, then attributes).
    pub(crate) payload: &'a [u8],
    /// The whole message, header included.
    pub(crate) raw: &'a [u8],
}

/// The messages in a buffer, up to the first whose length is malformed.
pub(crate) fn messages(bytes: &[u8]) -> impl Iterator<Item = Message<'_>> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        let len = u32_at(rest, 0)? as usize;
        if len < NLMSG_HDRLEN || len > rest.len() {
            rest = &[];
            return None;
        }
        let message = Message {
            kind: u16_at(rest, 4)?,
            seq: u32_at(rest, 8)?,
            payload: &rest[NLMSG_HDRLEN..len],
            raw: &rest[..len],
        };
        rest = rest.get(align4(len)..).unwrap_or(&[]);
        Some(message)
    })
}

/// The attributes (`nlattr`: type and value) in a buffer, up to the first
/// whose length is malformed. Types are returned without their flag bits.
pub(crate) fn attributes(bytes: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        let len = usize::from(u16_at(rest, 0)?);
        if len < 4 || len > rest.len() {
            rest = &[];
            return None;
        }
        let kind = u16_at(rest, 2)? & NLA_TYPE_MASK;
        let value = &rest[4..len];
        rest = rest.get(align4(len)..).unwrap_or(&[]);
        Some((kind, value))
    })
}

/// The bytes after a family header of `len` bytes (aligned), if any.
pub(crate) fn after_header(payload: &[u8], len: usize) -> Option<&[u8]> {
    payload.get(align4(len)..)
}

pub(crate) fn align4(len: usize) -> usize {
    (len + 3) & !3
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// A NUL-terminated string attribute.
pub(crate) fn string(value: &[u8]) -> String {
    let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
    String::from_utf8_lossy(&value[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(value);
        out.resize(align4(out.len()), 0);
        out
    }

    #[test]
    fn attributes_are_walked_with_their_padding() {
        let mut bytes = attr(1, b"tbf\0");
        bytes.extend(attr(0x8000 | 2, &[1, 2, 3]));
        bytes.extend(attr(7, &7u64.to_ne_bytes()));
        let found: Vec<_> = attributes(&bytes).collect();
        assert_eq!(found.len(), 3);
        assert_eq!(string(found[0].1), "tbf");
        assert_eq!(found[1], (2, &[1u8, 2, 3][..]), "the nested flag is masked");
        assert_eq!(u64_at(found[2].1, 0), Some(7));
    }

    #[test]
    fn a_malformed_length_ends_the_walk_without_panic() {
        let mut bytes = attr(1, b"netem\0");
        bytes.extend_from_slice(&200u16.to_ne_bytes());
        bytes.extend_from_slice(&3u16.to_ne_bytes());
        assert_eq!(attributes(&bytes).count(), 1);
        assert_eq!(
            attributes(&[2, 0, 1, 0]).count(),
            0,
            "length below the header"
        );
        assert_eq!(messages(&[40, 0, 0, 0, 1, 2]).count(), 0);
    }

    /// linux/if_link.h.
    const IFLA_IFNAME: u16 = 3;

    #[test]
    fn a_dump_of_this_namespaces_links_has_loopback() {
        let mut socket = RouteSocket::open().expect("rtnetlink socket");
        let header = [0u8; 16]; // ifinfomsg, AF_UNSPEC: every link
        let reply = socket.dump(libc::RTM_GETLINK, &header).expect("link dump");
        let names: Vec<String> = messages(&reply)
            .filter(|m| m.kind == libc::RTM_NEWLINK)
            .filter_map(|m| {
                attributes(after_header(m.payload, 16)?)
                    .find(|(k, _)| *k == IFLA_IFNAME)
                    .map(|(_, v)| string(v))
            })
            .collect();
        assert!(names.iter().any(|n| n == "lo"), "{names:?}");
        // A second dump on the same socket works (sequence numbers move on).
        assert!(!socket.dump(libc::RTM_GETLINK, &header).unwrap().is_empty());
    }
}
