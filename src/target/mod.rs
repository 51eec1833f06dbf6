//! Targets: where the server under test lives, and everything perflab
//! knows of a kind of target — parsing `--target`, credentials (URL,
//! environment, password files), connections and their errors
//! ([`postgres`], [`mysql`]), the statistics source sampled during a run,
//! the settings the doctor and the inventory read ([`settings`]), and the
//! servers perflab runs itself ([`managed`]). Nothing outside this folder
//! looks inside a target's text: what the rest needs is in [`Traits`].
//! Credentials never leave this module unredacted: [`Target::redacted`] is
//! what the store and reports see.

// The schemes `--target` takes, written once for help texts and errors.
macro_rules! schemes {
    () => {
        "sqlite:PATH, postgres://USER:PASS@HOST:PORT/DB, postgres:managed or mysql://USER:PASS@HOST:PORT/DB"
    };
}

mod args;
pub mod managed;
pub mod mysql;
mod open;
pub mod postgres;
pub mod settings;

pub use args::{validate_target, ServerOptions, TargetArgs};
pub use open::{Endpoint, Opened};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::path::PathBuf;

/// The system under test.
#[derive(Clone, PartialEq, Eq)]
pub enum Target {
    /// An embedded SQLite database file, opened in process.
    Sqlite { path: PathBuf },
    /// A PostgreSQL server; the URL may hold a password, so it is only ever
    /// shown or stored redacted.
    Postgres { url: String },
    /// A PostgreSQL server that perflab creates, starts and removes.
    PostgresManaged,
    /// A MySQL or MariaDB server; the URL is only ever shown redacted.
    Mysql { url: String },
    /// No server: the `null` workload's in-process stand-in.
    InProcess,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Target({})", self.redacted())
    }
}

/// Targets serialise as their redacted text: a plan stored in the results
/// store never holds a password.
impl Serialize for Target {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.redacted())
    }
}

/// A stored target reads back from its redacted text (a password shown as
/// `***` stays so: a stored plan is never used to connect).
impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text == "in-process" {
            return Ok(Target::InProcess);
        }
        Target::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// What the rest of perflab may know of a target, typed and stored with the
/// run's plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traits {
    /// The kind of target.
    pub kind: Kind,
    /// The server runs inside perflab's process (its CPU is perflab's).
    pub embedded: bool,
    /// One writer at a time: writers queue on the database's lock.
    pub single_writer: bool,
    /// perflab created the server for this run.
    pub managed: bool,
}

/// The kinds of target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Sqlite,
    Postgres,
    Mysql,
    InProcess,
}

impl Target {
    /// The target's traits.
    pub fn traits(&self) -> Traits {
        let (kind, embedded, single_writer, managed) = match self {
            Target::Sqlite { .. } => (Kind::Sqlite, true, true, false),
            Target::Postgres { .. } => (Kind::Postgres, false, false, false),
            Target::PostgresManaged => (Kind::Postgres, false, false, true),
            Target::Mysql { .. } => (Kind::Mysql, false, false, false),
            Target::InProcess => (Kind::InProcess, true, false, false),
        };
        Traits {
            kind,
            embedded,
            single_writer,
            managed,
        }
    }

    /// The traits of a target stored as text by a run whose plan predates
    /// stored traits (an unknown text: a server of no known kind).
    pub fn traits_of_text(text: &str) -> Traits {
        if text == "in-process" {
            return Target::InProcess.traits();
        }
        Target::parse(text).map_or(
            Traits {
                kind: Kind::InProcess,
                embedded: false,
                single_writer: false,
                managed: false,
            },
            |t| t.traits(),
        )
    }

    /// Parses a `--target` value.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if let Some(path) = text.strip_prefix("sqlite:") {
            if path.is_empty() {
                return Err("'sqlite:' needs a file path, e.g. sqlite:data.db".to_string());
            }
            return Ok(Target::Sqlite {
                path: PathBuf::from(path),
            });
        }
        if text == "postgres:managed" {
            return Ok(Target::PostgresManaged);
        }
        let scheme = text.split(':').next().unwrap_or_default();
        match scheme {
            "postgres" | "postgresql" if text.contains("://") => Ok(Target::Postgres {
                url: text.to_string(),
            }),
            "mysql" | "mariadb" if text.contains("://") => Ok(Target::Mysql {
                url: text.to_string(),
            }),
            _ => Err(format!(
                "'{}' is not a target this workload knows; use {SCHEMES}",
                redact(text)
            )),
        }
    }

    /// The target as it may be shown and stored: no password.
    pub fn redacted(&self) -> String {
        match self {
            Target::Sqlite { path } => format!("sqlite:{}", path.display()),
            Target::Postgres { url } | Target::Mysql { url } => redact(url),
            Target::PostgresManaged => "postgres:managed".to_string(),
            Target::InProcess => "in-process".to_string(),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// The schemes `--target` takes, for help texts and error messages.
pub const SCHEMES: &str = schemes!();

/// Replaces the password of a `scheme://user:password@host` string with `***`.
pub fn redact(text: &str) -> String {
    // A password can also ride in the query string (`?password=…`).
    let text = &match text.find("password=") {
        Some(at) => {
            let value = at + "password=".len();
            let end = text[value..].find('&').map_or(text.len(), |e| value + e);
            format!("{}***{}", &text[..value], &text[end..])
        }
        None => text.to_string(),
    };
    let Some(scheme_end) = text.find("://") else {
        return text.to_string();
    };
    let rest = &text[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match (authority.rfind('@'), authority.find(':')) {
        (Some(at), Some(colon)) if colon < at => format!(
            "{}{}:***{}",
            &text[..scheme_end + 3],
            &authority[..colon],
            &text[scheme_end + 3 + at..]
        ),
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://bob:s3cret@db:5432/shop"),
            "postgres://bob:***@db:5432/shop"
        );
        assert_eq!(redact("postgres://db/shop"), "postgres://db/shop");
        assert_eq!(redact("sqlite:x.db"), "sqlite:x.db");
        assert_eq!(
            redact("postgres://db/shop?user=bob&password=pw&sslmode=disable"),
            "postgres://db/shop?user=bob&password=***&sslmode=disable"
        );
    }

    #[test]
    fn sqlite_targets_parse() {
        assert_eq!(
            Target::parse("sqlite:data.db").unwrap(),
            Target::Sqlite {
                path: "data.db".into()
            }
        );
        assert!(Target::parse("sqlite:").is_err());
        let err = Target::parse("ftp://u:pw@h/x").unwrap_err();
        assert!(!err.contains("pw"), "{err}");
        let pg = Target::parse("postgres://bob:hunter2@db/shop").unwrap();
        assert_eq!(pg.redacted(), "postgres://bob:***@db/shop");
        assert_eq!(
            serde_json::to_string(&pg).unwrap(),
            "\"postgres://bob:***@db/shop\""
        );
        assert!(!format!("{pg:?}").contains("hunter2"));
        assert_eq!(
            Target::parse("postgres:managed").unwrap(),
            Target::PostgresManaged
        );
    }
}
