//! An HTTP/1 answer read to the end of its connection (the request said
//! `Connection: close`), bounded, and taken apart: its status and its body,
//! by `Content-Length`, by chunks (`Transfer-Encoding: chunked`, which a Go
//! server such as node_exporter uses for a page it writes as it goes), or
//! to the end. The agent client and the node_exporter probe read through
//! it; whatever answers in a peer's place and sends more than the bound is
//! refused, not buffered.

use std::borrow::Cow;
use std::io::Read;
use std::time::Duration;

/// The most of an answer's head read, bytes.
const MAX_HEAD: u64 = 64 << 10;

/// What came back.
#[derive(Debug, PartialEq)]
pub(crate) enum Answer<'a> {
    /// The status and the body (its chunks joined when it came in chunks).
    Whole(u16, Cow<'a, [u8]>),
    /// An HTTP head with less body than it announced, or no whole head.
    Cut,
    NotHttp,
    /// A head (its interim replies included) over [`MAX_HEAD`] bytes.
    HugeHead,
}

/// Reads `from` to its end: at most `max_body` bytes of body after a head
/// of at most 64 KiB. `what` names the peer in the error ("a perflab
/// agent"); `within` is the deadline the reader was given, said when the
/// peer is silent or slow (a timed-out read is `TimedOut`, whatever the
/// socket called it).
pub(crate) fn read(
    from: &mut impl Read,
    max_body: u64,
    what: &str,
    within: Duration,
) -> std::io::Result<Vec<u8>> {
    let bound = max_body.saturating_add(MAX_HEAD);
    let mut answer = Vec::new();
    if let Err(e) = from.take(bound).read_to_end(&mut answer) {
        return Err(match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                std::io::Error::new(std::io::ErrorKind::TimedOut, late(answer.len(), within))
            }
            _ => e,
        });
    }
    if answer.len() as u64 >= bound {
        return Err(std::io::Error::other(format!(
            "an answer over {} MiB; is it {what}?",
            max_body >> 20
        )));
    }
    Ok(answer)
}

/// What a peer that did not answer whole within `within` did, having sent
/// `got` bytes.
fn late(got: usize, within: Duration) -> String {
    let within = crate::units::format_duration(within);
    match got {
        0 => format!("sent nothing within {within}"),
        _ => format!("sent {got} bytes but no whole answer within {within}"),
    }
}

/// An HTTP/1 answer read to its end, taken apart. Interim answers (`100
/// Continue`, `103 Early Hints`) before the final one are skipped.
pub(crate) fn parse(answer: &[u8]) -> Answer<'_> {
    let mut rest = answer;
    loop {
        match head(rest) {
            Head::Interim(len) => rest = &rest[len..],
            Head::Final(status, framing, len) => return body(status, framing, &rest[len..]),
            Head::Cut => return Answer::Cut,
            Head::NotHttp => return Answer::NotHttp,
            Head::Huge => return Answer::HugeHead,
        }
        if answer.len() - rest.len() > MAX_HEAD as usize {
            return Answer::HugeHead;
        }
    }
}

/// How a final answer's body is delimited.
enum Framing {
    Chunked,
    Length(usize),
    ToTheEnd,
}

/// One answer's head at the front of the bytes: its length with what it
/// says.
enum Head {
    /// A 1xx other than `101 Switching Protocols`: another answer follows.
    Interim(usize),
    Final(u16, Framing, usize),
    Cut,
    NotHttp,
    Huge,
}

/// Reads the head at the front of `answer`, with room for as many headers
/// as it has lines (within its first 64 KiB).
fn head(answer: &[u8]) -> Head {
    let start = &answer[..answer.len().min(MAX_HEAD as usize)];
    let head_end = start
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(start.len());
    let lines = start[..head_end].iter().filter(|&&b| b == b'\n').count() + 1;
    let mut headers = vec![httparse::EMPTY_HEADER; lines];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(answer) {
        Ok(httparse::Status::Complete(len)) if len <= start.len() => len,
        Ok(_) if answer.len() > start.len() => return Head::Huge,
        Ok(httparse::Status::Partial) if answer.starts_with(b"HTTP/") => return Head::Cut,
        Err(httparse::Error::TooManyHeaders) => return Head::Huge,
        _ => return Head::NotHttp,
    };
    let Some(status) = response.code else {
        return Head::NotHttp;
    };
    if (100..200).contains(&status) && status != 101 {
        return Head::Interim(len);
    }
    let header = |name: &str| {
        response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .map(str::trim)
    };
    let framing = if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        Framing::Chunked
    } else {
        match header("content-length") {
            // A length over what memory holds is more than the body that
            // came.
            Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                Framing::Length(n.parse::<usize>().unwrap_or(usize::MAX))
            }
            _ => Framing::ToTheEnd,
        }
    };
    Head::Final(status, framing, len)
}

/// The final answer's body, as its framing delimits it.
fn body(status: u16, framing: Framing, body: &[u8]) -> Answer<'_> {
    match framing {
        Framing::Chunked => match dechunk(body) {
            Some(joined) => Answer::Whole(status, Cow::Owned(joined)),
            None => Answer::Cut,
        },
        Framing::Length(n) => match body.get(..n) {
            Some(body) => Answer::Whole(status, Cow::Borrowed(body)),
            None => Answer::Cut,
        },
        Framing::ToTheEnd => Answer::Whole(status, Cow::Borrowed(body)),
    }
}

/// A chunked body's chunks joined; none when it stops before its last
/// (zero-length) chunk, a chunk's size line is not hexadecimal, or a size
/// is more than what follows it (whatever the size: it is checked, never
/// added to blindly).
fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut joined = Vec::with_capacity(body.len());
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let line = std::str::from_utf8(&body[..line_end]).ok()?;
        // A size may carry extensions after ';', which mean nothing here.
        let size = line.split(';').next()?.trim();
        let size = usize::from_str_radix(size, 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            // Trailers, if any, follow; the body is whole.
            return Some(joined);
        }
        let (chunk, after) = body.split_at_checked(size)?;
        body = after.strip_prefix(b"\r\n")?;
        joined.extend_from_slice(chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(status: u16, body: &[u8]) -> Answer<'_> {
        Answer::Whole(status, Cow::Borrowed(body))
    }

    #[test]
    fn answers_are_whole_cut_or_not_http() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(parse(ok), whole(200, b"{}"));
        let closed = b"HTTP/1.1 401 Unauthorized\r\n\r\n{\"error\":1}";
        assert_eq!(parse(closed), whole(401, b"{\"error\":1}"));
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}"),
            Answer::Cut
        );
        assert_eq!(parse(b"HTTP/1.1 200 OK\r\nContent-"), Answer::Cut);
        assert_eq!(parse(b"\x15\x03\x03\x00\x02\x02\x32"), Answer::NotHttp);
        assert_eq!(parse(b""), Answer::NotHttp);
        assert_eq!(parse(b"SSH-2.0-OpenSSH\r\n"), Answer::NotHttp);
    }

    #[test]
    fn a_chunked_body_is_joined_and_a_cut_one_is_cut() {
        let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        let answer = |chunks: &[u8]| [head.as_slice(), chunks].concat();
        let good = answer(b"5\r\nup 1\n\r\nA;ext=1\r\n0123456789\r\n0\r\n\r\n");
        assert_eq!(parse(&good), whole(200, b"up 1\n0123456789"));
        // Before the last chunk, mid-chunk, or a size that is not hex.
        for bad in [
            &b"5\r\nup 1\n\r\n"[..],
            b"5\r\nup",
            b"5\r\nup 1\nXX0\r\n\r\n",
            b"zz\r\nup 1\n\r\n0\r\n\r\n",
            b"",
        ] {
            assert_eq!(parse(&answer(bad)), Answer::Cut, "{bad:?}");
        }
    }

    #[test]
    fn more_than_the_bound_is_refused_not_buffered() {
        let big = vec![b'x'; (1 << 20) + (64 << 10) + 1];
        let e = read(&mut big.as_slice(), 1 << 20, "a node_exporter", ANY).unwrap_err();
        assert!(
            e.to_string().contains("over 1 MiB; is it a node_exporter?"),
            "{e}"
        );
        let small = b"HTTP/1.1 200 OK\r\n\r\nok".to_vec();
        assert_eq!(
            read(&mut small.as_slice(), 1 << 20, "x", ANY).unwrap(),
            small
        );
    }

    const ANY: Duration = Duration::from_secs(5);

    #[test]
    fn a_chunk_size_near_the_top_of_usize_is_a_cut_answer() {
        let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        for size in [
            "ffffffffffffffff",
            "fffffffffffffffe",
            "7fffffffffffffff",
            "1ffffffffffffffff",
        ] {
            let answer = [&head[..], size.as_bytes(), b"\r\nup 1\n\r\n0\r\n\r\n"].concat();
            assert_eq!(parse(&answer), Answer::Cut, "{size}");
        }
        let huge = b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\nup";
        assert_eq!(parse(huge), Answer::Cut);
    }

    #[test]
    fn interim_answers_are_skipped_and_many_headers_accepted() {
        let answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(parse(answer), whole(200, b"ok"));
        assert_eq!(parse(b"HTTP/1.1 100 Continue\r\n\r\n"), Answer::NotHttp);
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..500 {
            many.extend_from_slice(format!("X-Header-{i}: {i}\r\n").as_bytes());
        }
        many.extend_from_slice(b"Content-Length: 2\r\n\r\nok");
        assert_eq!(parse(&many), whole(200, b"ok"));
        let mut huge = b"HTTP/1.1 200 OK\r\n".to_vec();
        while huge.len() <= MAX_HEAD as usize {
            huge.extend_from_slice(b"X-Filler: 0123456789abcdef\r\n");
        }
        huge.extend_from_slice(b"\r\nok");
        assert_eq!(parse(&huge), Answer::HugeHead);
    }

    /// A reader that says its deadline passed after `sent`.
    struct Late<'a>(&'a [u8]);

    impl Read for Late<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
            let n = self.0.len().min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_silent_or_slow_peer_is_told_with_the_deadline() {
        let e = read(&mut Late(b""), 1 << 20, "x", ANY).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(e.to_string(), "sent nothing within 5s");
        let e = read(&mut Late(b"HTTP/1.1 2"), 1 << 20, "x", ANY).unwrap_err();
        assert_eq!(e.to_string(), "sent 10 bytes but no whole answer within 5s");
    }
}

#[cfg(test)]
mod props {
    //! Arbitrary and HTTP-shaped answers: [`parse`] gives a value for
    //! each, never a panic, and never a body longer than what came.
    use super::*;
    use proptest::prelude::*;

    /// A chunk size line: small, near a power of two, or near `u64::MAX`.
    fn chunk_size() -> impl Strategy<Value = String> {
        prop_oneof![
            (0u64..64).prop_map(|n| format!("{n:x}")),
            (0u64..64).prop_map(|n| format!("{:x}", u64::MAX - n)),
            (0u32..64).prop_map(|s| format!("{:x}", 1u128 << s.min(127))),
            "[0-9a-fA-F]{1,40}",
            "[0-9a-z;= +-]{0,12}",
        ]
    }

    fn length() -> impl Strategy<Value = String> {
        prop_oneof![
            (0u64..100).prop_map(|n| n.to_string()),
            (0u64..64).prop_map(|n| (u64::MAX - n).to_string()),
            "[0-9]{18,40}",
            "[0-9a-z -]{0,8}",
        ]
    }

    /// An answer built as a peer might send it, cut anywhere.
    fn shaped() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec(
                (chunk_size(), prop::collection::vec(any::<u8>(), 0..24)),
                0..6,
            ),
            length(),
            0usize..200,
            any::<bool>(),
            0usize..3,
            any::<prop::sample::Index>(),
        )
            .prop_map(|(chunks, length, headers, chunked, interim, cut)| {
                let mut out = Vec::new();
                for _ in 0..interim {
                    out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                }
                out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
                for i in 0..headers {
                    out.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
                }
                if chunked {
                    out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                    for (size, data) in &chunks {
                        out.extend_from_slice(size.as_bytes());
                        out.extend_from_slice(b"\r\n");
                        out.extend_from_slice(data);
                        out.extend_from_slice(b"\r\n");
                    }
                } else {
                    out.extend_from_slice(format!("Content-Length: {length}\r\n\r\n").as_bytes());
                    for (_, data) in &chunks {
                        out.extend_from_slice(data);
                    }
                }
                let keep = cut.index(out.len() + 1);
                out.truncate(keep);
                out
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            if let Answer::Whole(_, body) = parse(&bytes) {
                prop_assert!(body.len() <= bytes.len());
            }
        }

        #[test]
        fn shaped_answers_never_panic(answer in shaped()) {
            if let Answer::Whole(_, body) = parse(&answer) {
                prop_assert!(body.len() <= answer.len());
            }
        }
    }
}
