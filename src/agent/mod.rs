//! `perflab agent`: a small HTTP server run on the server under test that
//! samples the host's counters every interval and serves the samples as
//! JSON to a perflab elsewhere (`perflab watch --probe agent://HOST:PORT`).
//! It reads counters only and executes nothing it is sent. Every request
//! needs the token (`Authorization: Bearer …`, compared in constant time);
//! listening beyond loopback without a token is refused at start-up; a
//! refused request is logged without the token it carried. Its client and
//! the bodies it serves are the probes' (`probe::agent_client`): the agent
//! imports the probes, never the reverse.

mod ring;
mod server;

pub use ring::Ring;
pub use server::{serve, AgentConfig};

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads a token file: its first line, trimmed; an empty token is an error.
pub fn read_token(path: &std::path::Path) -> Result<String, crate::error::PlanError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        crate::error::PlanError::new(format!(
            "cannot read the token file {}: {e}; give --token-file a readable file holding the token",
            path.display()
        ))
    })?;
    let token = text.lines().next().unwrap_or_default().trim().to_string();
    if token.is_empty() {
        return Err(crate::error::PlanError::new(format!(
            "the token file {} is empty; put a token (e.g. from `openssl rand -hex 32`) in it",
            path.display()
        )));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(!constant_time_eq(b"s3cret", b"s3creT"));
        assert!(!constant_time_eq(b"s3cret", b"s3cre"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
