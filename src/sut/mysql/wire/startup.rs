//! The connection phase of perflab's MySQL/MariaDB session: the server's
//! greeting, perflab's answer (its capabilities, the user, a token made
//! from the password and the greeting's scramble, the database), and the
//! server's replies until it accepts: a switch to another method, the
//! fast path of `caching_sha2_password`, or a refusal said in one line.
//! Source: the MySQL client/server protocol's "Connection Phase" pages.

use super::{protocol, server_refusal, MyWire};
use crate::error::PlanError;
use crate::sut::mysql::MyTarget;
use sha1::Sha1;
use sha2::{Digest, Sha256};
use std::io;

// Capability flags of the client/server protocol.
pub(super) const CLIENT_LONG_PASSWORD: u32 = 1;
pub(super) const CLIENT_CONNECT_WITH_DB: u32 = 8;
pub(super) const CLIENT_PROTOCOL_41: u32 = 0x200;
pub(super) const CLIENT_TRANSACTIONS: u32 = 0x2000;
pub(super) const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
pub(super) const CLIENT_PLUGIN_AUTH: u32 = 0x8_0000;
pub(super) const CLIENT_DEPRECATE_EOF: u32 = 0x100_0000;
/// utf8mb4_general_ci.
pub(super) const CHARSET: u8 = 45;

impl MyWire {
    /// The connection phase: the server's greeting, perflab's reply with
    /// its capabilities and credentials, then the server's verdict.
    pub(super) async fn handshake(target: &MyTarget) -> Result<MyWire, PlanError> {
        let mut wire = Self::open(target).await?;
        let lost = |e: io::Error| crate::sut::mysql::unreachable(target, &e);
        let (seq, greeting) = wire.packet().await.map_err(lost)?;
        if greeting.first() == Some(&0xFF) {
            return Err(server_refusal(target, &greeting));
        }
        let hello = Greeting::parse(&greeting).ok_or_else(|| protocol(target))?;
        let caps = capabilities(target, &hello)?;
        wire.deprecate_eof = caps & CLIENT_DEPRECATE_EOF != 0;
        let password = target.opts.password.as_deref().unwrap_or("").as_bytes();
        let plugin = hello.plugin.as_str();
        let token = auth_token(plugin, password, &hello.scramble)
            .ok_or_else(|| unsupported_plugin(target, plugin))?;
        let response = handshake_response(target, caps, plugin, &token);
        wire.send_packet(seq.wrapping_add(1), &response)
            .await
            .map_err(lost)?;
        wire.authenticate(target, plugin, password).await?;
        Ok(wire)
    }

    /// Reads the server's replies to the credentials until it accepts
    /// them: a switch to another method answered with a new token, a
    /// fast-auth step passed over, a refusal said in one line.
    async fn authenticate(
        &mut self,
        target: &MyTarget,
        plugin: &str,
        password: &[u8],
    ) -> Result<(), PlanError> {
        let lost = |e: io::Error| crate::sut::mysql::unreachable(target, &e);
        let mut plugin = plugin.to_string();
        loop {
            let (seq, reply) = self.packet().await.map_err(lost)?;
            match reply.first() {
                Some(0x00) => return Ok(()),
                Some(0xFF) => return Err(server_refusal(target, &reply)),
                // Switch to another method, with a new scramble.
                Some(0xFE) => {
                    let rest = &reply[1..];
                    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
                    plugin = String::from_utf8_lossy(&rest[..end]).into_owned();
                    let scramble = rest.get(end + 1..).unwrap_or_default();
                    let scramble = scramble.strip_suffix(&[0]).unwrap_or(scramble);
                    let token = auth_token(&plugin, password, scramble)
                        .ok_or_else(|| unsupported_plugin(target, &plugin))?;
                    self.send_packet(seq.wrapping_add(1), &token)
                        .await
                        .map_err(lost)?;
                }
                // caching_sha2_password: 3 is "accepted from cache", the OK
                // follows; 4 asks for the password in full, which needs TLS
                // or the server's RSA key.
                Some(0x01) if plugin == "caching_sha2_password" && reply.get(1) == Some(&3) => {}
                Some(0x01) if plugin == "caching_sha2_password" => {
                    return Err(PlanError::new(format!(
                        "{} wants the password in full (caching_sha2_password without a cached entry), which needs TLS; log in once with the mysql client to cache it, or give the user mysql_native_password",
                        target.display
                    )));
                }
                _ => return Err(protocol(target)),
            }
        }
    }
}

/// What the server says in its first packet.
pub(super) struct Greeting {
    pub(super) capabilities: u32,
    pub(super) scramble: Vec<u8>,
    pub(super) plugin: String,
}

impl Greeting {
    pub(super) fn parse(p: &[u8]) -> Option<Greeting> {
        if *p.first()? != 10 {
            return None;
        }
        let version_end = 1 + p.get(1..)?.iter().position(|&b| b == 0)?;
        let mut at = version_end + 1 + 4;
        let mut scramble = p.get(at..at + 8)?.to_vec();
        at += 8 + 1;
        let low = u16::from_le_bytes(p.get(at..at + 2)?.try_into().ok()?);
        at += 2;
        let Some(rest) = p.get(at..).filter(|r| r.len() >= 16) else {
            return Some(Greeting {
                capabilities: u32::from(low),
                scramble,
                plugin: "mysql_native_password".to_string(),
            });
        };
        let high = u16::from_le_bytes(rest[3..5].try_into().ok()?);
        let capabilities = u32::from(low) | u32::from(high) << 16;
        let auth_len = usize::from(rest[5]);
        at += 16;
        if capabilities & CLIENT_SECURE_CONNECTION != 0 {
            let len = auth_len.saturating_sub(8).max(13);
            let part = p.get(at..at + len)?;
            scramble.extend_from_slice(part.strip_suffix(&[0]).unwrap_or(part));
            at += len;
        }
        let plugin = match p.get(at..) {
            Some(name) if capabilities & CLIENT_PLUGIN_AUTH != 0 => {
                let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                String::from_utf8_lossy(&name[..end]).into_owned()
            }
            _ => "mysql_native_password".to_string(),
        };
        Some(Greeting {
            capabilities,
            scramble,
            plugin,
        })
    }
}

/// The answer to a scramble for `plugin`; none for a method not spoken here.
pub(super) fn auth_token(plugin: &str, password: &[u8], scramble: &[u8]) -> Option<Vec<u8>> {
    if password.is_empty() {
        return Some(Vec::new());
    }
    match plugin {
        // SHA1(password) XOR SHA1(scramble, SHA1(SHA1(password))).
        "mysql_native_password" => {
            let once = Sha1::digest(password);
            let twice = Sha1::digest(once);
            let mixed = Sha1::new()
                .chain_update(scramble)
                .chain_update(twice)
                .finalize();
            Some(once.iter().zip(mixed).map(|(a, b)| a ^ b).collect())
        }
        // SHA256(password) XOR SHA256(SHA256(SHA256(password)), scramble).
        "caching_sha2_password" => {
            let once = Sha256::digest(password);
            let twice = Sha256::digest(once);
            let mixed = Sha256::new()
                .chain_update(twice)
                .chain_update(scramble)
                .finalize();
            Some(once.iter().zip(mixed).map(|(a, b)| a ^ b).collect())
        }
        _ => None,
    }
}

/// The capabilities perflab asks for that the server offers; an old
/// server without the 4.1 protocol and its secure authentication is
/// refused.
fn capabilities(target: &MyTarget, hello: &Greeting) -> Result<u32, PlanError> {
    let mut caps = CLIENT_LONG_PASSWORD
        | CLIENT_PROTOCOL_41
        | CLIENT_TRANSACTIONS
        | CLIENT_SECURE_CONNECTION
        | CLIENT_PLUGIN_AUTH
        | CLIENT_DEPRECATE_EOF;
    if target.opts.db.is_some() {
        caps |= CLIENT_CONNECT_WITH_DB;
    }
    caps &= hello.capabilities;
    if caps & CLIENT_PROTOCOL_41 == 0 || caps & CLIENT_SECURE_CONNECTION == 0 {
        return Err(protocol(target));
    }
    Ok(caps)
}

/// The handshake response: capabilities, packet size, character set,
/// user, the authentication token, the database and the method.
fn handshake_response(target: &MyTarget, caps: u32, plugin: &str, token: &[u8]) -> Vec<u8> {
    let opts = &target.opts;
    let mut response = Vec::with_capacity(128);
    response.extend_from_slice(&caps.to_le_bytes());
    response.extend_from_slice(&(16u32 << 20).to_le_bytes());
    response.push(CHARSET);
    response.extend_from_slice(&[0; 23]);
    response.extend_from_slice(opts.user.as_deref().unwrap_or("").as_bytes());
    response.push(0);
    response.push(token.len() as u8);
    response.extend_from_slice(token);
    if let Some(db) = opts
        .db
        .as_ref()
        .filter(|_| caps & CLIENT_CONNECT_WITH_DB != 0)
    {
        response.extend_from_slice(db.as_bytes());
        response.push(0);
    }
    if caps & CLIENT_PLUGIN_AUTH != 0 {
        response.extend_from_slice(plugin.as_bytes());
        response.push(0);
    }
    response
}

fn unsupported_plugin(target: &MyTarget, plugin: &str) -> PlanError {
    PlanError::new(format!(
        "{} asks to log in with {plugin}, which perflab's MariaDB/MySQL session does not speak; give the user mysql_native_password (ALTER USER … IDENTIFIED WITH mysql_native_password BY '…')",
        target.display
    ))
}
