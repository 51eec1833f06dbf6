//! The echo protocol between `perflab run net` and an agent's echo role
//! (`perflab agent --echo`): the hello that opens every connection. What
//! follows it is raw bytes: requests and zero-byte responses of the sizes
//! the hello gave, or a stream one way. A refused hello is answered by one
//! line `ERR why\n` and the close.

/// The first bytes of every hello.
pub(crate) const MAGIC: &[u8; 4] = b"PLE1";
/// The hello's fixed part: magic, mode, request size, response size,
/// ticket length.
pub(crate) const HELLO_HEAD: usize = 4 + 1 + 4 + 4 + 1;
/// The largest request, response or stream message, bytes.
pub(crate) const MAX_MESSAGE: u32 = 16 << 20;

/// What a connection does after its hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Read a request, write a response, again (rr, crr).
    RequestResponse = 0,
    /// Read and drop (stream).
    Sink = 1,
    /// Write until the peer closes (maerts).
    Source = 2,
}

impl Mode {
    fn from_byte(byte: u8) -> Option<Mode> {
        match byte {
            0 => Some(Mode::RequestResponse),
            1 => Some(Mode::Sink),
            2 => Some(Mode::Source),
            _ => None,
        }
    }
}

/// A connection's hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hello {
    pub(crate) mode: Mode,
    /// Bytes of each request (rr, crr) or stream message.
    pub(crate) request: u32,
    /// Bytes of each response (rr, crr) or message written (maerts).
    pub(crate) response: u32,
}

impl Hello {
    /// The hello with `ticket`, as it is sent.
    pub(crate) fn encode(&self, ticket: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(HELLO_HEAD + ticket.len());
        out.extend_from_slice(MAGIC);
        out.push(self.mode as u8);
        out.extend_from_slice(&self.request.to_be_bytes());
        out.extend_from_slice(&self.response.to_be_bytes());
        out.push(u8::try_from(ticket.len()).unwrap_or(u8::MAX));
        out.extend_from_slice(ticket.as_bytes());
        out
    }

    /// Reads the fixed part of a hello: the hello and the ticket's length.
    pub(crate) fn parse(head: &[u8; HELLO_HEAD]) -> Result<(Hello, usize), String> {
        if &head[..4] != MAGIC {
            return Err("not a perflab echo hello (wrong magic)".to_string());
        }
        let mode = Mode::from_byte(head[4]).ok_or_else(|| format!("mode {} is none", head[4]))?;
        let size =
            |at: usize| u32::from_be_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
        let (request, response) = (size(5), size(9));
        for (what, value) in [("request", request), ("response", response)] {
            if value == 0 || value > MAX_MESSAGE {
                return Err(format!(
                    "a {what} size of {value} bytes; give 1 to {MAX_MESSAGE} bytes"
                ));
            }
        }
        Ok((
            Hello {
                mode,
                request,
                response,
            },
            usize::from(head[13]),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hello_reads_back_and_bad_ones_say_why() {
        let hello = Hello {
            mode: Mode::Source,
            request: 1,
            response: 65536,
        };
        let bytes = hello.encode("abc");
        let head: [u8; HELLO_HEAD] = bytes[..HELLO_HEAD].try_into().unwrap();
        assert_eq!(Hello::parse(&head).unwrap(), (hello, 3));
        let mut bad = head;
        bad[0] = b'G';
        assert!(Hello::parse(&bad).unwrap_err().contains("magic"));
        let mut bad = head;
        bad[4] = 7;
        assert!(Hello::parse(&bad).unwrap_err().contains("mode 7"));
        let big = Hello {
            response: MAX_MESSAGE + 1,
            ..hello
        }
        .encode("");
        let head: [u8; HELLO_HEAD] = big[..HELLO_HEAD].try_into().unwrap();
        assert!(Hello::parse(&head).unwrap_err().contains("response size"));
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Any 14 bytes are a hello or a reason, and a hello's sizes are
        /// within the bounds.
        #[test]
        fn any_hello_head_is_read_or_refused(
            magic in any::<bool>(),
            mut head in any::<[u8; HELLO_HEAD]>(),
        ) {
            if magic {
                head[..4].copy_from_slice(MAGIC);
                head[4] %= 4;
            }
            if let Ok((hello, ticket)) = Hello::parse(&head) {
                prop_assert!((1..=MAX_MESSAGE).contains(&hello.request));
                prop_assert!((1..=MAX_MESSAGE).contains(&hello.response));
                prop_assert!(ticket <= 255);
            }
        }
    }
}
