//! What must never be shown or stored: the password of any URL or DSN
//! (a target, a probe, a generator), the value of any parameter or
//! header that carries a secret. Every text that came from the user and
//! reaches a terminal, an error, the results store or a manifest passes
//! through here: one set of rules, so that a form hidden in one place is
//! hidden in all.

/// What stands in for a secret in shown and stored text.
pub(crate) const MASK: &str = "***";

/// Hides every secret a target's text, a command-line argument or an
/// error message may hold: the password of a URL's userinfo
/// (`scheme://user:password@host`, where the password may hold `/`, `?`,
/// `#` or `@` unencoded: the userinfo ends at the last `@`), and the value of every parameter whose name speaks of a
/// secret (`password`, `Pwd`, `sslpassword`, `token`, `secret`, …; any
/// case), in a query string (`?password=…&…`) or as `key=value` words
/// (`host=db password='a b'`), quoted or not. Over-hiding is preferred
/// to a leak: a text that is not a URL still has its parameters hidden.
pub fn redact(text: &str) -> String {
    redact_parameters(&redact_userinfo(text))
}

/// The URL's password replaced with `***`; any other text unchanged.
fn redact_userinfo(text: &str) -> String {
    let Some(scheme_end) = text.find("://") else {
        return text.to_string();
    };
    let start = scheme_end + 3;
    let rest = &text[start..];
    // The userinfo ends at the last '@' anywhere: a password may hold '@',
    // '/', '?' or '#' unencoded. A query value holding an '@' then hides
    // more than it must, which is preferred to a password shown.
    let Some(at) = rest.rfind('@') else {
        return text.to_string();
    };
    match rest[..at].find(':') {
        Some(colon) => format!("{}{MASK}{}", &text[..start + colon + 1], &rest[at..]),
        // A user alone is a name to a database, but to HTTP (and the
        // probes and agents reached over it) often a token.
        None if !names_a_user(&text[..scheme_end]) => {
            format!("{}{MASK}{}", &text[..start], &rest[at..])
        }
        None => text.to_string(),
    }
}

/// Whether a URL of `scheme` (the text before `://`, its last word
/// taken) puts a user name, not a secret, in its userinfo: a database's.
fn names_a_user(scheme: &str) -> bool {
    let scheme = scheme
        .rsplit(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    ["postgres", "postgresql", "mysql", "mariadb", "sqlite"].contains(&scheme.as_str())
}

/// Whether a parameter's name speaks of a secret.
fn secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "pass",
        "pwd",
        "secret",
        "token",
        "credential",
        "apikey",
        "api_key",
    ]
    .iter()
    .any(|word| name.contains(word))
}

/// Every `name=value` whose name speaks of a secret, its value replaced
/// with `***`. A name starts the text or follows `?`, `&`, `;`, a space or
/// a comma; a value ends at `&`, `;`, a space or a comma (not at `#`: a
/// password may hold one), or at its closing quote when it starts with one.
fn redact_parameters(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while let Some(eq) = text[i..].find('=').map(|e| i + e) {
        let name_start = text[..eq]
            .char_indices()
            .rev()
            .find(|(_, c)| matches!(c, '?' | '&' | ';' | ',' | '/') || c.is_whitespace())
            .map_or(0, |(p, c)| p + c.len_utf8());
        let value_start = eq + 1;
        let value_end = match bytes.get(value_start) {
            Some(&q @ (b'\'' | b'"')) => {
                // To the closing quote (a backslash escapes one), or the end.
                let mut j = value_start + 1;
                while j < bytes.len() && bytes[j] != q {
                    j += if bytes[j] == b'\\' { 2 } else { 1 };
                }
                (j + 1).min(bytes.len())
            }
            _ => text[value_start..]
                .find(|c: char| matches!(c, '&' | ';' | ',') || c.is_whitespace())
                .map_or(text.len(), |e| value_start + e),
        };
        if secret_name(&text[name_start..eq]) && value_end > value_start {
            out.push_str(&text[copied..value_start]);
            out.push_str(MASK);
            copied = value_end;
        }
        i = value_end.max(value_start);
    }
    out.push_str(&text[copied..]);
    out
}

/// Whether an HTTP header's name says it carries a secret (its value is
/// never printed or stored): `Authorization`, `Proxy-Authorization`,
/// `Cookie`, `X-Api-Token`, `X-Api-Key`, `X-Auth-*`, session and CSRF
/// headers, signatures. Over-hiding is preferred to a leak.
pub(crate) fn secret_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "auth",
        "cookie",
        "token",
        "secret",
        "key",
        "pass",
        "session",
        "credential",
        "signature",
        "jwt",
        "csrf",
        "xsrf",
    ]
    .iter()
    .any(|word| name.contains(word))
}

/// A `Name: value` header as it may be shown: a secret header's value
/// masked (`Authorization: ***`), any other redacted as text is. A text
/// with no `:` is masked whole: it may be a token given without its name.
pub(crate) fn redact_header(text: &str) -> String {
    match text.split_once(':') {
        Some((name, _)) if secret_header(name.trim()) => format!("{}: {MASK}", name.trim()),
        Some(_) => redact(text),
        None => MASK.to_string(),
    }
}

/// The flags whose value is a request header.
const HEADER_FLAGS: &[&str] = &["--header"];

/// A command line as it may be shown or stored: every word redacted, and
/// the value of every header flag (`--header VALUE`, `--header=VALUE`)
/// with a secret header's value masked.
pub(crate) fn redact_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut header_next = false;
    for arg in args {
        if header_next {
            out.push(redact_header(arg));
            header_next = false;
            continue;
        }
        if HEADER_FLAGS.contains(&arg.as_str()) {
            header_next = true;
            out.push(arg.clone());
            continue;
        }
        let joined = HEADER_FLAGS.iter().find_map(|flag| {
            arg.strip_prefix(flag)
                .and_then(|rest| rest.strip_prefix('='))
                .map(|value| format!("{flag}={}", redact_header(value)))
        });
        out.push(joined.unwrap_or_else(|| redact(arg)));
    }
    out
}

/// The environment variable a lab hands a cell's whole command line in
/// (JSON, an array of strings), while the cell's visible command line —
/// `/proc/PID/cmdline`, which every user of the host may read — is the
/// same line redacted. A process's environment only its own user reads.
pub(crate) const CELL_ARGS_ENV: &str = "PERFLAB_CELL_ARGS";

/// The words `given` (a lab's [`CELL_ARGS_ENV`]) stands for, when they
/// are the first of `visible` (the words after the program's name) before
/// redaction; none otherwise, so a variable left over from another
/// command never changes this one.
pub(crate) fn cell_args(visible: &[String], given: &str) -> Option<Vec<String>> {
    let whole: Vec<String> = serde_json::from_str(given).ok()?;
    visible.starts_with(&redact_args(&whole)).then_some(whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cell's secrets come from the environment only for the command
    /// line they were redacted from.
    #[test]
    fn a_cells_secrets_stand_in_for_its_own_redacted_line_alone() {
        let whole: Vec<String> = ["run", "bank", "--target", "postgres://u:PW@h/db"]
            .map(String::from)
            .to_vec();
        let visible = redact_args(&whole);
        assert!(!visible.join(" ").contains("PW@"), "{visible:?}");
        let given = serde_json::to_string(&whole).unwrap();
        assert_eq!(cell_args(&visible, &given), Some(whole.clone()));
        let mut longer = visible.clone();
        longer.extend(["--store".to_string(), "perflab.db".to_string()]);
        assert_eq!(cell_args(&longer, &given), Some(whole.clone()));
        let other: Vec<String> = ["run", "null"].map(String::from).to_vec();
        assert_eq!(cell_args(&other, &given), None);
        assert_eq!(cell_args(&visible, "not json"), None);
    }

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

    /// The forms an audit found printed in the clear, and their kin.
    #[test]
    fn passwords_holding_url_delimiters_or_in_any_parameter_are_redacted() {
        for (given, shown) in [
            (
                "postgres://u:SEC/RETPW@127.0.0.1:1/db?sslmode=bogus",
                "postgres://u:***@127.0.0.1:1/db?sslmode=bogus",
            ),
            (
                "mysql://u:SEC/RETPW@127.0.0.1:3306/db",
                "mysql://u:***@127.0.0.1:3306/db",
            ),
            ("mysql://u:a@b@h/db", "mysql://u:***@h/db"),
            ("postgres://u:p?w#d@h/db", "postgres://u:***@h/db"),
            ("postgres://u:p@?w@h:1", "postgres://u:***@h:1"),
            (
                "postgres://h/db?user=u&Password=SECRETPW&x=1",
                "postgres://h/db?user=u&Password=***&x=1",
            ),
            ("postgres://h/db?PWD=SECRETPW", "postgres://h/db?PWD=***"),
            (
                "postgres://h/db?sslpassword=SECRETPW",
                "postgres://h/db?sslpassword=***",
            ),
            (
                "host=db user=u password='SECRET PW' dbname=x",
                "host=db user=u password=*** dbname=x",
            ),
            ("--token=SECRETPW", "--token=***"),
            ("Server=db;Uid=u;Pwd=SECRETPW;", "Server=db;Uid=u;Pwd=***;"),
        ] {
            assert_eq!(redact(given), shown, "{given}");
        }
        // The last '@' anywhere ends the userinfo: a query value holding
        // one hides more than it must, which is preferred to a password
        // holding '@' and '?' shown.
        assert_eq!(
            redact("postgres://db:5432/shop?user=bob@corp"),
            "postgres://db:***@corp"
        );
        // Odd texts pass through whole, never panic.
        // A separator of more than one byte (a no-break space) before a name.
        assert_eq!(redact("a\u{a0}pwd=x"), "a\u{a0}pwd=***");
        for odd in [
            "",
            "=",
            "==",
            "password=",
            "a=\'",
            "x://@",
            "x://:@",
            "p='",
            "é=ü password=é",
        ] {
            let _ = redact(odd);
        }
        assert_eq!(redact("password="), "password=");
    }

    /// A secret header is masked wherever its flag puts it; a header that
    /// holds no secret is kept.
    #[test]
    fn secret_headers_are_masked_in_a_command_line() {
        let given: Vec<String> = [
            "perflab",
            "run",
            "web",
            "--header",
            "Authorization: Bearer SECRETPW",
            "--header=X-Api-Token: SECRETPW",
            "--header",
            "Cookie: sid=SECRETPW",
            "--header",
            "Accept-Encoding: gzip",
            "--target",
            "http://u:SECRETPW@127.0.0.1:1/",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        let shown = redact_args(&given).join(" ");
        assert!(!shown.contains("SECRETPW"), "{shown}");
        assert!(shown.contains("--header Authorization: ***"), "{shown}");
        assert!(shown.contains("--header=X-Api-Token: ***"), "{shown}");
        assert!(shown.contains("--header Accept-Encoding: gzip"), "{shown}");
        assert!(shown.contains("http://u:***@127.0.0.1:1/"), "{shown}");
        assert_eq!(redact_header("Bearer SECRETPW"), "***");
        for name in [
            "Proxy-Authorization",
            "X-Auth-Key",
            "X-Session-Id",
            "X-CSRF-Token",
        ] {
            assert!(secret_header(name), "{name}");
        }
        assert!(!secret_header("Accept"));
        // A token as a URL's user is hidden; a database's user is kept.
        assert_eq!(redact("https://ghp_SECRET@h/x"), "https://***@h/x");
        assert_eq!(
            redact("--probe=node-exporter://SECRET@h:1"),
            "--probe=node-exporter://***@h:1"
        );
        assert_eq!(redact("postgres://bob@db/x"), "postgres://bob@db/x");
    }
}
