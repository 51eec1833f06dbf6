//! Targets: where the system under test lives. Credentials never leave this
//! module unredacted: [`Target::redacted`] is what the store and reports see.

use serde::Serialize;
use std::fmt;
use std::path::PathBuf;

/// The system under test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// An embedded SQLite database file, opened in process.
    Sqlite { path: PathBuf },
    /// No server: the `null` workload's in-process stand-in.
    InProcess,
}

impl Target {
    /// Parses a `--target` value.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if let Some(path) = text.strip_prefix("sqlite:") {
            if path.is_empty() {
                return Err("'sqlite:' needs a file path, e.g. sqlite:bank.db".to_string());
            }
            return Ok(Target::Sqlite {
                path: PathBuf::from(path),
            });
        }
        let scheme = text.split(':').next().unwrap_or_default();
        match scheme {
            "postgres" | "postgresql" | "mysql" | "mariadb" => Err(format!(
                "{scheme} targets are not available in this build yet; use sqlite:PATH"
            )),
            _ => Err(format!(
                "'{}' is not a target this workload knows; use sqlite:PATH",
                redact(text)
            )),
        }
    }

    /// The target as it may be shown and stored: no password.
    pub fn redacted(&self) -> String {
        match self {
            Target::Sqlite { path } => format!("sqlite:{}", path.display()),
            Target::InProcess => "in-process".to_string(),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// Replaces the password of a `scheme://user:password@host` string with `***`.
pub fn redact(text: &str) -> String {
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
            redact("postgres://bob:s3cret@db:5432/bank"),
            "postgres://bob:***@db:5432/bank"
        );
        assert_eq!(redact("postgres://db/bank"), "postgres://db/bank");
        assert_eq!(redact("sqlite:x.db"), "sqlite:x.db");
    }

    #[test]
    fn sqlite_targets_parse() {
        assert_eq!(
            Target::parse("sqlite:bank.db").unwrap(),
            Target::Sqlite {
                path: "bank.db".into()
            }
        );
        assert!(Target::parse("sqlite:").is_err());
        let err = Target::parse("ftp://u:pw@h/x").unwrap_err();
        assert!(!err.contains("pw"), "{err}");
    }
}
