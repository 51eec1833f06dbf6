//! A database session's own socket, TCP or Unix, for the lean sessions
//! that speak a server's protocol themselves (PostgreSQL, MySQL/MariaDB).

use bytes::BytesMut;
use std::io;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    /// Connects over TCP with Nagle's algorithm off (a statement is one
    /// small write that waits for its reply).
    pub(crate) async fn tcp(host: &str, port: u16) -> io::Result<Stream> {
        let s = TcpStream::connect((host, port)).await?;
        let _ = s.set_nodelay(true);
        Ok(Stream::Tcp(s))
    }

    pub(crate) async fn unix(path: &std::path::Path) -> io::Result<Stream> {
        UnixStream::connect(path).await.map(Stream::Unix)
    }

    pub(crate) async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(bytes).await,
            Stream::Unix(s) => s.write_all(bytes).await,
        }
    }

    /// Reads what has arrived into `buf`; 0 at the end of the stream.
    pub(crate) async fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read_buf(buf).await,
            Stream::Unix(s) => s.read_buf(buf).await,
        }
    }
}
