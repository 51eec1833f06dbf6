//! A virtual user's cookies, kept as RFC 6265 says for one site: each
//! `Set-Cookie` stored under its name and path (the path the reply
//! names, or the directory of the request it answers), replaced by a
//! later one of the same name and path, removed by a `Max-Age` of zero or
//! less or an `Expires` date passed, and sent only with requests whose
//! path is within its own and while it has not expired. `Domain`,
//! `Secure` and `HttpOnly` are read past: a user's requests all go to the
//! run's target. Slots are reused, so a journey allocates nothing once
//! the jar has grown.

use super::MAX_COOKIES;
use std::ops::Range;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The longest cookie name, value or path kept, bytes.
const MAX_COOKIE: usize = 4 << 10;

/// One cookie's slot.
#[derive(Default)]
struct Cookie {
    name: Vec<u8>,
    value: Vec<u8>,
    path: Vec<u8>,
    /// When it expires; none: at the end of the journey.
    expires: Option<Instant>,
}

/// A user's cookies: the first `live` slots.
#[derive(Default)]
pub(super) struct Jar {
    slots: Vec<Cookie>,
    live: usize,
}

/// What one `Set-Cookie` says.
struct SetCookie<'a> {
    name: &'a [u8],
    value: &'a [u8],
    path: Option<&'a [u8]>,
    /// From `Max-Age` (which wins) or `Expires`: seconds from now, none
    /// when neither is given.
    lifetime: Option<i64>,
}

impl Jar {
    /// Forgets every cookie (a new journey).
    pub(super) fn clear(&mut self) {
        self.live = 0;
    }

    /// The value of the live cookie `name`, if any.
    pub(super) fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.slots[..self.live]
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.value.as_slice())
    }

    /// Keeps the cookies `head` sets, in reply to a request for `target`
    /// (its path and query).
    pub(super) fn keep(&mut self, head: &[u8], target: &[u8]) {
        let mut now = None;
        for set in set_cookies(head) {
            let default = default_path(target);
            let path = set.path.filter(|p| p.starts_with(b"/")).unwrap_or(default);
            if set.name.is_empty()
                || [set.name, set.value, path]
                    .iter()
                    .any(|s| s.len() > MAX_COOKIE)
            {
                continue;
            }
            let expires = match set.lifetime {
                Some(s) if s <= 0 => {
                    self.remove(set.name, path);
                    continue;
                }
                // A lifetime past what the clock holds never ends in a run.
                Some(s) => now
                    .get_or_insert_with(Instant::now)
                    .checked_add(Duration::from_secs(s.unsigned_abs())),
                None => None,
            };
            self.store(set.name, set.value, path, expires);
        }
    }

    /// Appends a `Cookie` header line to `out` for the request whose
    /// target (path and query) is `out[target]`: the live cookies whose
    /// path it is within; nothing when none is. Expired cookies are
    /// dropped first.
    pub(super) fn write_header(&mut self, out: &mut Vec<u8>, target: Range<usize>) {
        if self.slots[..self.live].iter().any(|c| c.expires.is_some()) {
            let now = Instant::now();
            let mut i = 0;
            while i < self.live {
                if self.slots[i].expires.is_some_and(|t| t <= now) {
                    self.live -= 1;
                    self.slots.swap(i, self.live);
                } else {
                    i += 1;
                }
            }
        }
        let target = out.get(target).unwrap_or_default();
        let path = &target[..target
            .iter()
            .position(|&b| b == b'?')
            .unwrap_or(target.len())];
        // Which cookies go, before `out` grows (at most 64 live).
        let sends = self.slots[..self.live]
            .iter()
            .enumerate()
            .filter(|(_, c)| path_matches(path, &c.path))
            .fold(0u64, |m, (i, _)| m | 1 << i);
        let mut first = true;
        for (_, c) in self.slots[..self.live]
            .iter()
            .enumerate()
            .filter(|(i, _)| sends & (1 << i) != 0)
        {
            out.extend_from_slice(if first { b"Cookie: " } else { b"; " });
            first = false;
            out.extend_from_slice(&c.name);
            out.push(b'=');
            out.extend_from_slice(&c.value);
        }
        if !first {
            out.extend_from_slice(b"\r\n");
        }
    }

    fn remove(&mut self, name: &[u8], path: &[u8]) {
        if let Some(i) = self.find(name, path) {
            self.live -= 1;
            self.slots.swap(i, self.live);
        }
    }

    fn find(&self, name: &[u8], path: &[u8]) -> Option<usize> {
        self.slots[..self.live]
            .iter()
            .position(|c| c.name == name && c.path == path)
    }

    /// Stores a cookie in its slot, or a free one (none past
    /// [`MAX_COOKIES`]).
    fn store(&mut self, name: &[u8], value: &[u8], path: &[u8], expires: Option<Instant>) {
        let i = match self.find(name, path) {
            Some(i) => i,
            None if self.live >= MAX_COOKIES => return,
            None => {
                if self.slots.len() == self.live {
                    self.slots.push(Cookie::default());
                }
                self.live += 1;
                self.live - 1
            }
        };
        let c = &mut self.slots[i];
        for (to, from) in [
            (&mut c.name, name),
            (&mut c.value, value),
            (&mut c.path, path),
        ] {
            to.clear();
            to.extend_from_slice(from);
        }
        c.expires = expires;
    }
}

/// The directory of a request's path (RFC 6265, 5.1.4): up to its last
/// `/`, or `/`.
fn default_path(target: &[u8]) -> &[u8] {
    let path = &target[..target
        .iter()
        .position(|&b| b == b'?')
        .unwrap_or(target.len())];
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) if i > 0 && path.starts_with(b"/") => &path[..i],
        _ => b"/",
    }
}

/// Whether a request's `path` is within a cookie's (RFC 6265, 5.1.4):
/// the same, or below it at a `/`.
fn path_matches(path: &[u8], cookie: &[u8]) -> bool {
    path.starts_with(cookie)
        && (path.len() == cookie.len() || cookie.ends_with(b"/") || path[cookie.len()] == b'/')
}

/// The value a head's `Set-Cookie` gives cookie `name`, if any.
pub(super) fn set_value<'a>(head: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    set_cookies(head).find(|c| c.name == name).map(|c| c.value)
}

/// The cookies a head sets.
fn set_cookies(head: &[u8]) -> impl Iterator<Item = SetCookie<'_>> {
    super::head::headers(head)
        .filter(|(n, _)| n.eq_ignore_ascii_case(b"set-cookie"))
        .filter_map(|(_, v)| {
            let mut parts = v.split(|&b| b == b';');
            let pair = parts.next()?;
            let eq = pair.iter().position(|&b| b == b'=')?;
            let mut set = SetCookie {
                name: pair[..eq].trim_ascii(),
                value: pair[eq + 1..].trim_ascii(),
                path: None,
                lifetime: None,
            };
            let mut max_age = None;
            let mut expires = None;
            for attr in parts {
                let (key, value) = match attr.iter().position(|&b| b == b'=') {
                    Some(i) => (attr[..i].trim_ascii(), attr[i + 1..].trim_ascii()),
                    None => (attr.trim_ascii(), &b""[..]),
                };
                if key.eq_ignore_ascii_case(b"max-age") {
                    max_age = max_age.or_else(|| seconds(value));
                } else if key.eq_ignore_ascii_case(b"expires") {
                    expires = expires.or_else(|| http_date(value));
                } else if key.eq_ignore_ascii_case(b"path") {
                    set.path = Some(value);
                }
            }
            set.lifetime = max_age.or_else(|| {
                let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
                expires.map(|t: i64| t.saturating_sub(i64::try_from(now).unwrap_or(i64::MAX)))
            });
            Some(set)
        })
}

/// A `Max-Age`: an optional `-` and digits (RFC 6265, 5.2.2); too many
/// digits saturate.
fn seconds(v: &[u8]) -> Option<i64> {
    let (negative, digits) = match v.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, v),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits.iter().fold(0i64, |n, &d| {
        n.saturating_mul(10).saturating_add(i64::from(d - b'0'))
    });
    Some(if negative { -n } else { n })
}

/// A cookie date (RFC 6265, 5.1.1, which reads the IMF, RFC 850 and
/// asctime forms alike) as seconds since the Unix epoch; none when it is
/// not one.
fn http_date(v: &[u8]) -> Option<i64> {
    let (mut time, mut day, mut month, mut year) = (None, None, None, None);
    let delimiter = |b: &u8| !(b.is_ascii_alphanumeric() || *b == b':');
    for token in v.split(delimiter).filter(|t| !t.is_empty()) {
        if time.is_none() {
            if let Some(t) = clock(token) {
                time = Some(t);
                continue;
            }
        }
        let digits = token.iter().take_while(|b| b.is_ascii_digit()).count();
        let number = || {
            token[..digits]
                .iter()
                .fold(0i64, |n, &d| n * 10 + i64::from(d - b'0'))
        };
        if day.is_none() && (1..=2).contains(&digits) {
            day = Some(number());
        } else if month.is_none() && token.len() >= 3 && digits == 0 {
            const MONTHS: [&[u8]; 12] = [
                b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct",
                b"nov", b"dec",
            ];
            month = MONTHS
                .iter()
                .position(|m| token[..3].eq_ignore_ascii_case(m))
                .map(|m| m as i64 + 1);
        } else if year.is_none() && (2..=4).contains(&digits) {
            year = Some(match number() {
                y @ 70..=99 => y + 1900,
                y @ 0..=69 => y + 2000,
                y => y,
            });
        }
    }
    let ((h, m, s), day, month, year) = (time?, day?, month?, year?);
    if !(1..=31).contains(&day) || year < 1601 || h > 23 || m > 59 || s > 59 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s)
}

/// `hh:mm:ss` (one or two digits each).
fn clock(token: &[u8]) -> Option<(i64, i64, i64)> {
    let mut parts = token.split(|&b| b == b':');
    let mut next = || -> Option<i64> {
        let p = parts.next()?;
        ((1..=2).contains(&p.len()) && p.iter().all(u8::is_ascii_digit))
            .then(|| p.iter().fold(0, |n, &d| n * 10 + i64::from(d - b'0')))
    };
    let t = (next()?, next()?, next()?);
    parts.next().is_none().then_some(t)
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar
/// (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(lines: &[&str]) -> Vec<u8> {
        let mut h = b"HTTP/1.1 200 OK\r\n".to_vec();
        for l in lines {
            h.extend_from_slice(format!("Set-Cookie: {l}\r\n").as_bytes());
        }
        h.extend_from_slice(b"\r\n");
        h
    }

    fn sent(jar: &mut Jar, target: &str) -> String {
        let mut out = target.as_bytes().to_vec();
        jar.write_header(&mut out, 0..target.len());
        String::from_utf8(out.split_off(target.len())).unwrap()
    }

    #[test]
    fn cookies_go_only_where_their_path_reaches() {
        let mut jar = Jar::default();
        jar.keep(
            &head(&["a=1", "b=2; Path=/shop", "c=3; Path=/shop/", "d=4; path=x"]),
            b"/login/form?next=1",
        );
        // a and d take the login's directory; b and c their own paths.
        assert_eq!(sent(&mut jar, "/login/form"), "Cookie: a=1; d=4\r\n");
        assert_eq!(sent(&mut jar, "/login"), "Cookie: a=1; d=4\r\n");
        assert_eq!(sent(&mut jar, "/loginx"), "");
        assert_eq!(sent(&mut jar, "/shop"), "Cookie: b=2\r\n");
        assert_eq!(sent(&mut jar, "/shop/cart?x=1"), "Cookie: b=2; c=3\r\n");
        assert_eq!(sent(&mut jar, "/shopping"), "");
        // The same name on another path is another cookie; on the same
        // path it replaces the value.
        jar.keep(&head(&["b=5; Path=/", "b=6; Path=/shop"]), b"/");
        assert_eq!(sent(&mut jar, "/shop/x"), "Cookie: b=6; c=3; b=5\r\n");
        assert_eq!(jar.get(b"a"), Some(&b"1"[..]));
        jar.clear();
        assert_eq!(sent(&mut jar, "/shop/x"), "");
    }

    #[test]
    fn max_age_and_expires_end_a_cookie() {
        let mut jar = Jar::default();
        jar.keep(
            &head(&[
                "gone=1; Max-Age=0",
                "kept=1; Max-Age=3600",
                "past=1; Expires=Sun, 06 Nov 1994 08:49:37 GMT",
                "future=1; Expires=Fri, 01 Jan 2100 00:00:00 GMT",
                "both=1; Expires=Sun, 06 Nov 1994 08:49:37 GMT; Max-Age=60",
                "short=1; Max-Age=1",
            ]),
            b"/",
        );
        assert_eq!(
            sent(&mut jar, "/"),
            "Cookie: kept=1; future=1; both=1; short=1\r\n"
        );
        jar.keep(&head(&["kept=2; Max-Age=-1"]), b"/");
        assert_eq!(jar.get(b"kept"), None);
        std::thread::sleep(Duration::from_millis(1100));
        // Removing a cookie moves the last live one into its slot.
        assert_eq!(sent(&mut jar, "/"), "Cookie: both=1; future=1\r\n");
    }

    #[test]
    fn cookie_dates_are_read_in_each_form() {
        let t = 784_111_777; // 1994-11-06 08:49:37 UTC
        for form in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(http_date(form.as_bytes()), Some(t), "{form}");
        }
        assert_eq!(http_date(b"Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            http_date(b"Tue, 29 Feb 2028 23:59:59 GMT"),
            Some(1_835_481_599)
        );
        for bad in [
            "",
            "tomorrow",
            "Sun, 06 Nov 1994 25:00:00 GMT",
            "06 Nov 1994",
        ] {
            assert_eq!(http_date(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(seconds(b"99999999999999999999999"), Some(i64::MAX));
        assert_eq!(seconds(b"-5"), Some(-5));
        assert_eq!(seconds(b"5s"), None);
    }

    proptest::proptest! {
        #[test]
        fn any_set_cookie_is_kept_or_not_without_a_panic(
            value in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
        ) {
            let mut h = b"HTTP/1.1 200 OK\r\nSet-Cookie: ".to_vec();
            h.extend_from_slice(&value);
            h.extend_from_slice(b"\r\n\r\n");
            let mut jar = Jar::default();
            jar.keep(&h, b"/a/b");
            let mut out = b"/a/b".to_vec();
            jar.write_header(&mut out, 0..4);
        }
    }
}
