//! [`Wire`]: one TCP connection, plain or in TLS (rustls, driven by hand
//! over the blocking socket), where every read and write ends by one
//! deadline. rustls's own `Stream` loops on the socket until a record is
//! whole, so a peer sending a byte at a time could hold it past any
//! timeout set per read; here each socket read is given what is left of
//! the deadline, and the deadline is the whole exchange's.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

/// A connection with its deadline.
pub(crate) struct Wire {
    socket: TcpStream,
    tls: Option<rustls::Connection>,
    deadline: Instant,
}

impl Wire {
    /// Plain text.
    pub(crate) fn plain(socket: TcpStream, deadline: Instant) -> Self {
        Wire {
            socket,
            tls: None,
            deadline,
        }
    }

    /// The server's side of a TLS session; the handshake happens on the
    /// first read.
    pub(crate) fn server(
        socket: TcpStream,
        config: Arc<rustls::ServerConfig>,
        deadline: Instant,
    ) -> io::Result<Self> {
        let tls = rustls::ServerConnection::new(config).map_err(io::Error::other)?;
        Ok(Wire {
            socket,
            tls: Some(tls.into()),
            deadline,
        })
    }

    /// The client's side of a TLS session with `name`; the handshake
    /// happens on the first write.
    pub(crate) fn client(
        socket: TcpStream,
        config: Arc<rustls::ClientConfig>,
        name: rustls::pki_types::ServerName<'static>,
        deadline: Instant,
    ) -> io::Result<Self> {
        let tls = rustls::ClientConnection::new(config, name).map_err(io::Error::other)?;
        Ok(Wire {
            socket,
            tls: Some(tls.into()),
            deadline,
        })
    }

    /// Moves the deadline (a server answering after it has read).
    pub(crate) fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    /// Whether the connection is in TLS.
    pub(crate) fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// What is left until the deadline; an error once it has passed.
    fn left(&self) -> io::Result<std::time::Duration> {
        self.deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "the deadline passed"))
    }

    /// Sends what TLS has queued (handshake messages, records, alerts).
    fn flush_tls(&mut self) -> io::Result<()> {
        loop {
            let left = self.left()?;
            let Some(tls) = self.tls.as_mut() else {
                return Ok(());
            };
            if !tls.wants_write() {
                return Ok(());
            }
            self.socket.set_write_timeout(Some(left))?;
            tls.write_tls(&mut self.socket)?;
        }
    }

    /// Ends a TLS session with its close notification (best effort).
    pub(crate) fn close(&mut self) {
        if let Some(tls) = self.tls.as_mut() {
            tls.send_close_notify();
            let _ = self.flush_tls();
        }
    }
}

impl Read for Wire {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let left = self.left()?;
            let Some(tls) = self.tls.as_mut() else {
                self.socket.set_read_timeout(Some(left))?;
                return self.socket.read(buf);
            };
            match tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if tls.wants_write() {
                self.flush_tls()?;
                continue;
            }
            let Some(tls) = self.tls.as_mut() else {
                continue;
            };
            self.socket.set_read_timeout(Some(left))?;
            if tls.read_tls(&mut self.socket)? == 0 {
                // The peer closed: what rustls holds is all there is.
                return match tls.reader().read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                    other => other,
                };
            }
            if let Err(e) = tls.process_new_packets() {
                // The alert that says why goes to the peer first.
                let _ = self.flush_tls();
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        }
    }
}

impl Write for Wire {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        match self.tls.as_mut() {
            None => {
                self.socket.set_write_timeout(Some(left))?;
                self.socket.write(bytes)
            }
            Some(tls) => {
                let n = tls.writer().write(bytes)?;
                self.flush_tls()?;
                Ok(n)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.tls {
            None => self.socket.flush(),
            Some(_) => self.flush_tls(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::tls::{client_config, parse_fingerprint, Identity, Trust};
    use std::net::TcpListener;
    use std::time::Duration;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        (client, listener.accept().unwrap().0)
    }

    /// Bytes cross a pinned TLS session both ways, and the reader sees
    /// the end after the close notification.
    #[test]
    fn a_pinned_session_carries_bytes_both_ways() {
        let identity = Identity::self_signed(vec!["localhost".into()]).unwrap();
        let pin = parse_fingerprint(&identity.fingerprint(), "--f").unwrap();
        let (c, s) = pair();
        let deadline = Instant::now() + Duration::from_secs(30);
        let server = std::thread::spawn(move || {
            let mut wire = Wire::server(s, identity.server_config().unwrap(), deadline).unwrap();
            let mut got = [0u8; 5];
            wire.read_exact(&mut got).unwrap();
            wire.write_all(b"pong").unwrap();
            wire.close();
            got
        });
        let config = client_config(&Trust::Pinned(vec![pin])).unwrap();
        let name = crate::wire::tls::server_name("localhost", "--f").unwrap();
        let mut wire = Wire::client(c, config, name, deadline).unwrap();
        wire.write_all(b"ping!").unwrap();
        wire.flush().unwrap();
        let mut answer = Vec::new();
        wire.read_to_end(&mut answer).unwrap();
        assert_eq!(answer, b"pong");
        assert_eq!(&server.join().unwrap(), b"ping!");
    }

    /// A peer that takes the connection and says nothing, or sends a
    /// byte now and then, is given up on at the deadline, in TLS as in
    /// plain text.
    #[test]
    fn a_silent_or_trickling_peer_ends_at_the_deadline() {
        let (c, s) = pair();
        let config = client_config(&Trust::Any).unwrap();
        let name = crate::wire::tls::server_name("localhost", "--f").unwrap();
        let mut wire =
            Wire::client(c, config, name, Instant::now() + Duration::from_millis(300)).unwrap();
        wire.write_all(b"x").unwrap();
        let e = wire.read(&mut [0u8; 16]).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
            ),
            "{e}"
        );
        drop(s);

        let identity = Identity::self_signed(vec!["localhost".into()]).unwrap();
        let (mut c, s) = pair();
        let trickle = std::thread::spawn(move || {
            // A ClientHello's first bytes, one at a time, 100 ms apart.
            for b in [0x16u8, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc] {
                if c.write_all(&[b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let deadline = Instant::now() + Duration::from_millis(350);
        let mut wire = Wire::server(s, identity.server_config().unwrap(), deadline).unwrap();
        let e = wire.read(&mut [0u8; 16]).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
            ),
            "{e}"
        );
        trickle.join().unwrap();
    }
}
