//! Where a redirect's `Location` leads on the target: an absolute path,
//! a URL of the target's own scheme, host and port, or a reference
//! relative to the request it answers (`next`, `../list`, `?page=2`),
//! resolved as RFC 3986 (section 5.2) says. Anything else — another host,
//! another scheme, a network-path reference (`//host/x`), bytes a request
//! line cannot carry — leads nowhere, and the redirect is not followed.
//! Written into a buffer the user keeps: no allocation once it has grown.

use crate::sut::http::HttpBase;

/// Writes the path and query `location` leads to into `out`, given the
/// path (and query) of the request it answers, `from`. False when it
/// leads off the target.
pub(super) fn resolve(location: &[u8], from: &[u8], base: &HttpBase, out: &mut Vec<u8>) -> bool {
    out.clear();
    if !location.iter().all(u8::is_ascii_graphic) {
        return false;
    }
    // The fragment is the client's, never sent.
    let location = &location[..find(location, b'#')];
    if location.starts_with(b"//") {
        return false;
    }
    if location.starts_with(b"/") {
        absolute(location, out);
        return true;
    }
    if has_scheme(location) {
        return same_origin(location, base).is_some_and(|path| {
            absolute(path, out);
            true
        });
    }
    relative(location, from, out);
    true
}

/// An absolute path (with or without a query), its dot segments removed.
fn absolute(reference: &[u8], out: &mut Vec<u8>) {
    let (path, query) = reference.split_at(find(reference, b'?'));
    // `http://host:port` and `http://host:port?q` name the root.
    if !path.starts_with(b"/") {
        out.push(b'/');
    }
    out.extend_from_slice(path);
    remove_dot_segments(out);
    out.extend_from_slice(query);
}

/// The path of an absolute URL on `base`'s own origin; none elsewhere.
fn same_origin<'a>(location: &'a [u8], base: &HttpBase) -> Option<&'a [u8]> {
    let scheme: &[u8] = if base.tls { b"https://" } else { b"http://" };
    let rest = strip_prefix_ignore_case(location, scheme)?;
    let end = rest
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(rest.len());
    let authority = std::str::from_utf8(&rest[..end]).ok()?;
    let default_port = if base.tls { 443 } else { 80 };
    let (h, p) = crate::sut::http::split_host_port(authority, default_port)?;
    let path = &rest[end..];
    (p == base.port && h.eq_ignore_ascii_case(&base.host)).then_some(path)
}

/// Whether a reference begins with a scheme (`name:` before any `/`,
/// `?`): then it is absolute, not relative.
fn has_scheme(r: &[u8]) -> bool {
    let end = r
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b':'))
        .unwrap_or(r.len());
    r.get(end) == Some(&b':')
        && r.first().is_some_and(u8::is_ascii_alphabetic)
        && r[..end]
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// A relative path reference (with or without a query) merged with the
/// directory of `from`, its dot segments removed.
fn relative(reference: &[u8], from: &[u8], out: &mut Vec<u8>) {
    let from_path = &from[..find(from, b'?')];
    let split = find(reference, b'?');
    let (path, query) = reference.split_at(split);
    if path.is_empty() {
        // `?page=2`, or nothing: the same path, with the new query if any.
        out.extend_from_slice(from_path);
        out.extend_from_slice(if query.is_empty() {
            &from[from_path.len()..]
        } else {
            query
        });
        return;
    }
    let dir = from_path
        .iter()
        .rposition(|&b| b == b'/')
        .map_or(&b"/"[..], |i| &from_path[..=i]);
    if !dir.starts_with(b"/") {
        out.push(b'/');
    }
    out.extend_from_slice(dir);
    out.extend_from_slice(path);
    remove_dot_segments(out);
    out.extend_from_slice(query);
}

/// Removes `.` and `..` segments from an absolute path in place; `..`
/// never climbs above the root.
fn remove_dot_segments(p: &mut Vec<u8>) {
    let n = p.len();
    let (mut read, mut write) = (0, 0);
    while read < n {
        // p[read] is the '/' that opens a segment.
        let start = read + 1;
        let end = p[start..]
            .iter()
            .position(|&b| b == b'/')
            .map_or(n, |e| start + e);
        let last = end == n;
        match &p[start..end] {
            b"." => {}
            b".." => write = p[..write].iter().rposition(|&b| b == b'/').unwrap_or(0),
            _ => {
                p.copy_within(read..end, write);
                write += end - read;
                read = end;
                continue;
            }
        }
        // A path that ends in a dot segment names its directory.
        if last {
            p[write] = b'/';
            write += 1;
        }
        read = end;
    }
    p.truncate(write.max(1));
}

/// The index of the first `b` in `s`, or its length.
fn find(s: &[u8], b: u8) -> usize {
    s.iter().position(|&c| c == b).unwrap_or(s.len())
}

fn strip_prefix_ignore_case<'a>(s: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    (s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &s[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> HttpBase {
        HttpBase {
            tls: false,
            host: "127.0.0.1".to_string(),
            port: 8080,
            path: String::new(),
        }
    }

    fn to(location: &str, from: &str) -> Option<String> {
        let mut out = Vec::new();
        resolve(location.as_bytes(), from.as_bytes(), &base(), &mut out)
            .then(|| String::from_utf8(out).unwrap())
    }

    #[test]
    fn relative_references_resolve_against_the_request_they_answer() {
        // RFC 3986's examples (section 5.4.1) on the path /b/c/d;p?q.
        let from = "/b/c/d;p?q";
        for (reference, path) in [
            ("g", "/b/c/g"),
            ("./g", "/b/c/g"),
            ("g/", "/b/c/g/"),
            ("/g", "/g"),
            ("?y", "/b/c/d;p?y"),
            ("g?y", "/b/c/g?y"),
            ("#s", "/b/c/d;p?q"),
            ("g#s", "/b/c/g"),
            (";x", "/b/c/;x"),
            ("", "/b/c/d;p?q"),
            (".", "/b/c/"),
            ("./", "/b/c/"),
            ("..", "/b/"),
            ("../", "/b/"),
            ("../g", "/b/g"),
            ("../..", "/"),
            ("../../", "/"),
            ("../../g", "/g"),
            // Abnormal ones (5.4.2): never above the root.
            ("../../../g", "/g"),
            ("/./g", "/g"),
            ("/../g", "/g"),
            ("g.", "/b/c/g."),
            ("..g", "/b/c/..g"),
            ("./../g", "/b/g"),
            ("g/./h", "/b/c/g/h"),
            ("g/../h", "/b/c/h"),
        ] {
            assert_eq!(to(reference, from).as_deref(), Some(path), "{reference}");
        }
        assert_eq!(to("next", "/").as_deref(), Some("/next"));
        assert_eq!(to("next", "/login?x=1").as_deref(), Some("/next"));
    }

    #[test]
    fn only_the_targets_own_origin_is_followed() {
        assert_eq!(
            to("http://127.0.0.1:8080/again?x", "/a").as_deref(),
            Some("/again?x")
        );
        assert_eq!(to("HTTP://127.0.0.1:8080/a", "/").as_deref(), Some("/a"));
        assert_eq!(to("http://127.0.0.1:8080", "/a").as_deref(), Some("/"));
        assert_eq!(
            to("http://127.0.0.1:8080/x/../y", "/").as_deref(),
            Some("/y")
        );
        for elsewhere in [
            "http://example.com/x",
            "https://127.0.0.1:8080/x",
            "http://127.0.0.1:8081/x",
            "//example.com/x",
            "mailto:a@b",
            "javascript:x",
            "/a b",
            "/a\r\nX-Injected: 1",
        ] {
            assert_eq!(to(elsewhere, "/a"), None, "{elsewhere}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_location_resolves_to_a_path_or_nowhere(
            location in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            from in "/[a-z./?]{0,20}",
        ) {
            let mut out = Vec::new();
            if resolve(&location, from.as_bytes(), &base(), &mut out) {
                proptest::prop_assert!(out.starts_with(b"/"));
                proptest::prop_assert!(out.iter().all(u8::is_ascii_graphic));
            }
        }
    }
}
