//! `perflab agent`: a small HTTP server run on the server under test that
//! samples the host's counters every interval and serves the samples as
//! JSON to a perflab elsewhere (`perflab watch --probe agent://HOST:PORT`).
//! It reads counters only and executes nothing it is sent. Every request
//! needs the token (`Authorization: Bearer …`, compared in constant time);
//! listening beyond loopback without a token, or without TLS
//! (`--tls-cert`/`--tls-key`, or `--tls-self-signed` whose fingerprint it
//! prints), is refused at start-up; a refused request is logged without
//! the token it carried. Its HTTP
//! server ([`http`]) bounds what a client can take: request size,
//! connections at once, time to send a request. Its client and
//! the bodies it serves are the probes' (`probe::agent_client`): the agent
//! imports the probes, never the reverse. With `--echo` it is also the
//! far end of `perflab run net` ([`echo`]).

mod echo;
mod generate;
pub(crate) mod http;
mod ring;
mod server;

pub(crate) use ring::Ring;
pub(crate) use server::{serve, AgentConfig};

/// Compares two byte strings in time that depends only on their lengths.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The shortest token an agent takes, characters.
pub(crate) const MIN_TOKEN: usize = 16;

/// Reads a token file: its first line, trimmed, read from at most its
/// first 4 KiB of a regular file (a device is refused, a huge file is not
/// read whole). A token must be at least [`MIN_TOKEN`] visible ASCII
/// characters. An error names the file, not a flag (the commands read
/// through [`read_token_file`], which names theirs).
#[cfg(test)]
pub(crate) fn read_token(path: &std::path::Path) -> Result<String, crate::error::PlanError> {
    read_token_given(path, None)
}

/// [`read_token`] of the file `flag` gave, whose errors name `flag`.
pub(crate) fn read_token_file(
    path: &std::path::Path,
    flag: &str,
) -> Result<String, crate::error::PlanError> {
    read_token_given(path, Some(flag))
}

fn read_token_given(
    path: &std::path::Path,
    flag: Option<&str>,
) -> Result<String, crate::error::PlanError> {
    use std::io::Read;
    let fail = |why: String| {
        crate::error::PlanError::new(format!("the token file {} {why}", path.display()))
    };
    let mut head = Vec::new();
    crate::util::open_regular(path)
        .and_then(|f| {
            if let Some(warning) = f.metadata().ok().and_then(|m| open_to_others(path, &m)) {
                crate::util::err(format_args!("warning: {warning}\n"));
            }
            f.take(4096).read_to_end(&mut head)
        })
        .map_err(|e| {
            let give = flag.map_or("give".to_string(), |flag| format!("give {flag}"));
            fail(format!(
                "cannot be read: {e}; {give} a readable file holding the token"
            ))
        })?;
    let text = String::from_utf8_lossy(&head);
    let token = text.lines().next().unwrap_or_default().trim().to_string();
    let make = "put one (e.g. from `openssl rand -hex 32`) in it";
    if token.is_empty() {
        return Err(fail(format!("holds no token; {make}")));
    }
    if !token.chars().all(|c| c.is_ascii_graphic()) {
        return Err(fail(format!(
            "holds a token with characters other than visible ASCII; {make}"
        )));
    }
    if token.len() < MIN_TOKEN {
        return Err(fail(format!(
            "holds a token of {} characters; a token needs at least {MIN_TOKEN}: {make}",
            token.len()
        )));
    }
    Ok(token)
}

/// What a token file that users other than its owner may write is told:
/// anyone who can write it can set the token every agent trusts.
fn open_to_others(path: &std::path::Path, meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o777;
    (mode & 0o022 != 0).then(|| {
        format!(
            "the token file {} may be written by other users (mode {mode:04o}); `chmod 600 {}` it",
            path.display(),
            path.display()
        )
    })
}

/// The token an `Authorization` header carries with the `Bearer` scheme,
/// whose name is matched in any case (RFC 7235); empty without one.
pub(crate) fn bearer(header: &str) -> &str {
    match header.trim().split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_others_may_read_is_warned_of() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "0123456789abcdef0123\n").unwrap();
        let warning = |mode: u32| {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            open_to_others(&path, &std::fs::metadata(&path).unwrap())
        };
        let said = warning(0o666).expect("a world-readable token is warned of");
        assert!(
            said.contains("mode 0666") && said.contains("chmod 600"),
            "{said}"
        );
        assert!(warning(0o620).is_some());
        assert_eq!(warning(0o644), None);
        assert_eq!(warning(0o600), None);
        assert_eq!(warning(0o400), None);
        assert_eq!(read_token(&path).unwrap(), "0123456789abcdef0123");
    }

    #[test]
    fn tokens_compare_exactly() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(!constant_time_eq(b"s3cret", b"s3creT"));
        assert!(!constant_time_eq(b"s3cret", b"s3cre"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    #[test]
    fn the_bearer_scheme_is_matched_in_any_case() {
        assert_eq!(bearer("Bearer abc"), "abc");
        assert_eq!(bearer("bearer abc"), "abc");
        assert_eq!(bearer("  BEARER   abc  "), "abc");
        assert_eq!(bearer("Basic abc"), "");
        assert_eq!(bearer("Bearer"), "");
        assert_eq!(bearer(""), "");
    }

    /// Short, empty, binary and endless token files are refused with what
    /// is wrong; a good token is read from the first line.
    #[test]
    fn token_files_are_read_bounded_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let good = "0123456789abcdef0123";
        assert_eq!(
            read_token(&file("good", format!("{good}\nrest\n").as_bytes())).unwrap(),
            good
        );
        for (name, bytes, says) in [
            ("empty", &b"\n"[..], "holds no token"),
            ("short", &b"s3cret\n"[..], "at least 16"),
            ("binary", &[0u8; 64][..], "visible ASCII"),
            ("spaced", &b"0123456789 abcdef0123\n"[..], "visible ASCII"),
        ] {
            let e = read_token(&file(name, bytes)).unwrap_err().to_string();
            assert!(e.contains(says), "{name}: {e}");
        }
        // /dev/zero is no token file: refused, never read.
        let e = read_token(std::path::Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is a character device, not a regular file"),
            "{e}"
        );
        let e = read_token(&dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot be read"), "{e}");
    }
}
