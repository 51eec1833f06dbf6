//! An HTTP/1 answer read to the end of its connection (the request said
//! `Connection: close`), bounded, and taken apart: its status and its body,
//! by `Content-Length`, by chunks (`Transfer-Encoding: chunked`, which a Go
//! server such as node_exporter uses for a page it writes as it goes), or
//! to the end. The agent client and the node_exporter probe read through
//! it; whatever answers in a peer's place and sends more than the bound is
//! refused, not buffered.

use std::borrow::Cow;
use std::io::Read;

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
}

/// Reads `from` to its end: at most `max_body` bytes of body after a head
/// of at most 64 KiB. `what` names the peer in the error ("a perflab
/// agent").
pub(crate) fn read(from: &mut impl Read, max_body: u64, what: &str) -> std::io::Result<Vec<u8>> {
    let mut answer = Vec::new();
    from.take(max_body + MAX_HEAD).read_to_end(&mut answer)?;
    if answer.len() as u64 >= max_body + MAX_HEAD {
        return Err(std::io::Error::other(format!(
            "an answer over {} MiB; is it {what}?",
            max_body >> 20
        )));
    }
    Ok(answer)
}

/// An HTTP/1 answer read to its end, taken apart.
pub(crate) fn parse(answer: &[u8]) -> Answer<'_> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    let head = match response.parse(answer) {
        Ok(httparse::Status::Complete(head)) => head,
        Ok(httparse::Status::Partial) if answer.starts_with(b"HTTP/") => return Answer::Cut,
        _ => return Answer::NotHttp,
    };
    let Some(status) = response.code else {
        return Answer::NotHttp;
    };
    let body = &answer[head..];
    let header = |name: &str| {
        response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .map(str::trim)
    };
    if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        return match dechunk(body) {
            Some(joined) => Answer::Whole(status, Cow::Owned(joined)),
            None => Answer::Cut,
        };
    }
    match header("content-length").and_then(|n| n.parse::<usize>().ok()) {
        Some(n) if body.len() < n => Answer::Cut,
        Some(n) => Answer::Whole(status, Cow::Borrowed(&body[..n])),
        None => Answer::Whole(status, Cow::Borrowed(body)),
    }
}

/// A chunked body's chunks joined; none when it stops before its last
/// (zero-length) chunk or a chunk's size line is not hexadecimal.
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
        if body.len() < size + 2 || &body[size..size + 2] != b"\r\n" {
            return None;
        }
        joined.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
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
        let e = read(&mut big.as_slice(), 1 << 20, "a node_exporter").unwrap_err();
        assert!(
            e.to_string().contains("over 1 MiB; is it a node_exporter?"),
            "{e}"
        );
        let small = b"HTTP/1.1 200 OK\r\n\r\nok".to_vec();
        assert_eq!(read(&mut small.as_slice(), 1 << 20, "x").unwrap(), small);
    }
}
