//! A reply's head as the flow reads it: its header lines, by name.

/// A head's header lines, `(name, value)`, the status line left out.
pub(super) fn headers(head: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    head.split(|&b| b == b'\n').skip(1).filter_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        Some((line[..colon].trim_ascii(), line[colon + 1..].trim_ascii()))
    })
}

/// The first value of header `name` (any case).
pub(super) fn header<'a>(head: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    headers(head)
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
}
