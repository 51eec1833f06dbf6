//! `perflab run web --flow FILE` against a small shop the test runs on
//! 127.0.0.1, which holds each user to its journey: a login checked
//! against the users' passwords answers 303 with a session cookie and a
//! relative `Location` (`home`) — and a cookie for `/cart` only, and one
//! already expired, neither of which may come back elsewhere — the home
//! page it leads to gives a token only to that cookie, the item list
//! only to that token, and a purchase is taken only for an item listed and
//! the session's own user. Any step out of turn is refused (and counted
//! by the shop), so a run without errors is a run whose values were
//! captured and sent on as the flow says. Bad flows end in one line.

use crate::support::{contains, last_export, perflab_expect, perflab_ok, refused, tempdir};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The shop's state: sessions and tokens handed out, the items listed,
/// and what it served and refused, by name.
#[derive(Default)]
struct Shop {
    sessions: HashMap<String, String>,
    tokens: HashMap<String, String>,
    /// The items last listed to each session.
    listed: HashMap<String, Vec<u64>>,
    served: BTreeMap<String, u64>,
    next: u64,
}

/// The users and their passwords, as the CSV gives them.
const USERS: [(&str, &str); 3] = [("ann", "p,1"), ("bob", "x\"y"), ("cy", "z")];

struct ShopServer {
    port: u16,
    shop: Arc<Mutex<Shop>>,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl ShopServer {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let shop: Arc<Mutex<Shop>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (Arc::clone(&shop), Arc::clone(&stop));
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let s = Arc::clone(&s);
                std::thread::spawn(move || serve(conn, &s));
            }
        });
        ShopServer {
            port,
            shop,
            stop,
            accept: Some(accept),
        }
    }

    fn served(&self) -> BTreeMap<String, u64> {
        self.shop.lock().unwrap().served.clone()
    }
}

impl Drop for ShopServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// One request as the shop reads it.
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn cookie(&self, name: &str) -> Option<&str> {
        self.header("cookie")?.split("; ").find_map(|c| {
            c.split_once('=')
                .filter(|(n, _)| *n == name)
                .map(|(_, v)| v)
        })
    }
}

/// Reads one request off `conn` (none at its end, or after 30 s of silence).
fn read_request(conn: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Request> {
    let mut chunk = [0u8; 16 << 10];
    let head_end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        assert!(buf.len() < 1 << 20, "a head over 1 MiB");
    };
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    assert!(req.parse(&buf[..head_end]).unwrap().is_complete());
    let headers: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_string(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect();
    let (method, path) = (
        req.method.unwrap().to_string(),
        req.path.unwrap().to_string(),
    );
    let length: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, v)| v.parse().unwrap());
    while buf.len() < head_end + length {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = String::from_utf8_lossy(&buf[head_end..head_end + length]).into_owned();
    buf.drain(..head_end + length);
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}

fn serve(mut conn: TcpStream, shop: &Mutex<Shop>) {
    conn.set_read_timeout(Some(Duration::from_secs(30))).ok();
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut conn, &mut buf) {
        let (status, extra, body) = answer(&req, &mut shop.lock().unwrap());
        let reply = format!(
            "HTTP/1.1 {status}\r\n{extra}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if conn.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// The shop's answer to `req`: status, extra header lines, body. What it
/// did is counted by name (`login`, `refused login`, …).
fn answer(req: &Request, shop: &mut Shop) -> (String, String, String) {
    let session_user = req
        .cookie("sid")
        .and_then(|sid| shop.sessions.get(sid).cloned());
    let token_user = req
        .header("authorization")
        .and_then(|a| a.strip_prefix("Bearer "))
        .and_then(|t| shop.tokens.get(t).cloned());
    // No cookie goes where its path does not reach, nor once it expired.
    let strays = req.cookie("old").is_some()
        || (!req.path.starts_with("/cart/") && req.cookie("cart").is_some());
    let (what, reply) = match (req.method.as_str(), req.path.as_str()) {
        _ if strays => (
            "refused stray cookie",
            ("400 Bad Request".into(), String::new(), String::new()),
        ),
        ("POST", "/login") => {
            let form: HashMap<&str, &str> = req
                .body
                .split('&')
                .filter_map(|kv| kv.split_once('='))
                .collect();
            let known = USERS
                .iter()
                .any(|(u, p)| form.get("user") == Some(u) && form.get("pass") == Some(p));
            if known {
                shop.next += 1;
                let sid = format!("s{}", shop.next);
                shop.sessions.insert(sid.clone(), form["user"].to_string());
                *shop
                    .served
                    .entry(format!("login as {}", form["user"]))
                    .or_default() += 1;
                // The cart's cookie reaches only /cart; the old one has expired.
                let extra = format!(
                    "Location: home\r\nSet-Cookie: sid={sid}; Path=/; HttpOnly\r\n\
                     Set-Cookie: cart={sid}; Path=/cart\r\n\
                     Set-Cookie: old=1; Expires=Thu, 01 Jan 1970 00:00:00 GMT\r\n"
                );
                ("login", ("303 See Other".into(), extra, String::new()))
            } else {
                (
                    "refused login",
                    ("401 Unauthorized".into(), String::new(), String::new()),
                )
            }
        }
        ("GET", "/home") => match session_user {
            Some(user) => {
                shop.next += 1;
                let token = format!("t{}", shop.next);
                shop.tokens.insert(token.clone(), user.clone());
                let body = format!("{{\"user\": \"{user}\", \"token\": \"{token}\"}}");
                ("home", ("200 OK".into(), String::new(), body))
            }
            None => (
                "refused home",
                ("401 Unauthorized".into(), String::new(), String::new()),
            ),
        },
        ("GET", path) if path.starts_with("/items?page=") => match token_user {
            Some(_) => {
                let page: u64 = path["/items?page=".len()..].parse().unwrap_or(0);
                // Every fourth page is empty: the flow's capture finds nothing.
                let ids: Vec<u64> = if page % 4 == 3 {
                    Vec::new()
                } else {
                    vec![100 + page, 200 + page]
                };
                let sid = req.cookie("sid").unwrap_or_default().to_string();
                shop.listed.insert(sid, ids.clone());
                let items: Vec<String> = ids.iter().map(|i| format!("{{\"id\": {i}}}")).collect();
                let body = format!("{{\"items\": [{}]}}", items.join(", "));
                ("items", ("200 OK".into(), String::new(), body))
            }
            None => (
                "refused items",
                ("403 Forbidden".into(), String::new(), String::new()),
            ),
        },
        ("POST", path) if path.starts_with("/cart/") => {
            let id: Option<u64> = path["/cart/".len()..].parse().ok();
            let mine = session_user.as_deref() == req.header("x-user")
                && req.cookie("cart").is_some()
                && req.cookie("cart") == req.cookie("sid");
            let listed = req
                .cookie("sid")
                .and_then(|sid| shop.listed.get(sid))
                .is_some_and(|ids| id.is_some_and(|i| ids.get(1) == Some(&i)));
            if mine && listed {
                ("buy", ("201 Created".into(), String::new(), "{}".into()))
            } else {
                (
                    "refused buy",
                    ("409 Conflict".into(), String::new(), String::new()),
                )
            }
        }
        _ => (
            "unknown",
            ("404 Not Found".into(), String::new(), String::new()),
        ),
    };
    *shop.served.entry(what.to_string()).or_default() += 1;
    reply
}

/// The shop's journey, with its data file and body.
fn write_flow(dir: &std::path::Path, think: &str) -> std::path::PathBuf {
    let csv: String = std::iter::once("name,password".to_string())
        .chain(
            USERS
                .iter()
                .map(|(u, p)| format!("{u},\"{}\"", p.replace('"', "\"\""))),
        )
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(dir.join("users.csv"), csv).unwrap();
    std::fs::write(dir.join("login.txt"), "user=${name}&pass=${password}").unwrap();
    let flow = format!(
        "data users.csv\nredirects follow\n\n# name: login\nPOST /login\nContent-Type: application/x-www-form-urlencoded\n@login.txt\ncapture token json $.token\n\n# name: items\nGET /items?page=${{iteration}}\nAuthorization: Bearer ${{token}}\ncapture item json $.items[1].id\n\n# name: buy\nPOST /cart/${{item}}\nX-User: ${{name}}\nthink {think}\n"
    );
    let file = dir.join("shop.flow");
    std::fs::write(&file, flow).unwrap();
    file
}

#[test]
fn users_walk_the_journey_with_captured_values_cookies_and_their_own_rows() {
    let shop = ShopServer::start();
    let dir = tempdir();
    write_flow(dir.path(), "30ms");
    let out = perflab_ok(
        dir.path(),
        &format!(
            "run web --target http://127.0.0.1:{}/ --flow shop.flow --users 4 --max-error-rate 30% --warmup 0s --duration 2s",
            shop.port
        ),
    );
    contains(&out, "login");
    let served = shop.served();
    for refusal in [
        "refused login",
        "refused home",
        "refused items",
        "refused buy",
        "refused stray cookie",
        "unknown",
    ] {
        assert!(!served.contains_key(refusal), "{served:?}");
    }
    // Four users on three rows: the first row's name logs in for two.
    let (ann, bob, cy) = (
        served["login as ann"],
        served["login as bob"],
        served["login as cy"],
    );
    assert!(ann > bob && ann > cy && bob > 0 && cy > 0, "{served:?}");
    let (logins, homes, buys) = (served["login"], served["home"], served["buy"]);
    // Every login's redirect followed, but the pre-flight request's (one
    // login, to see that the shop answers) and any a run's end cut short.
    assert!(
        homes < logins && logins <= homes + 1 + 4,
        "every login's redirect followed: {served:?}"
    );
    assert!(buys > 20, "{served:?}");
    let export = last_export(dir.path());
    let ops = crate::support::ops_of_step0(&export);
    assert_eq!(
        ops.keys().map(String::as_str).collect::<Vec<_>>(),
        ["buy", "items", "login"]
    );
    // The login and the buy never fail; an empty item list is a capture
    // error of the items request, and that user logs in again.
    assert!(
        ops["login"].1.is_empty() && ops["buy"].1.is_empty(),
        "{ops:?}"
    );
    let missing = ops["items"].1.get("capture").copied().unwrap_or(0);
    assert!(missing > 0, "{ops:?}");
    assert_eq!(ops["items"].1.len(), 1, "{ops:?}");
    // Each user's journeys in order: logins lead buys and missing items
    // by at most a journey per user.
    let (login_ok, items_ok, buy_ok) = (ops["login"].0, ops["items"].0, ops["buy"].0);
    assert!(
        items_ok + missing <= login_ok + 4 && login_ok <= items_ok + missing + 4,
        "{ops:?}"
    );
    assert!(buy_ok <= items_ok && items_ok <= buy_ok + 4, "{ops:?}");
    // The think after a buy, and only there: a third of the operations
    // pause 30 ms.
    let think = export["steps"][0]["summary"]["mean_think"]
        .as_f64()
        .unwrap();
    let share = buy_ok as f64 / (login_ok + items_ok + missing + buy_ok) as f64;
    assert!(
        (think - 0.030 * share).abs() < 0.004,
        "mean think {think} s for a buy share of {share:.3}"
    );
    let setup = &export["run"]["setup"]["targets"];
    assert_eq!(setup["flow"]["steps"], 3, "{setup}");
    assert_eq!(setup["flow"]["data_rows"], 3, "{setup}");
    assert_eq!(
        setup["flow"]["captured"],
        serde_json::json!(["token", "item"])
    );
    // The same journey in an open loop: each arrival takes a free user's
    // next request.
    perflab_ok(
        dir.path(),
        &format!(
            "run web --target http://127.0.0.1:{}/ --flow shop.flow --rate 200 --connections 4 --max-error-rate 30% --warmup 0s --duration 1s",
            shop.port
        ),
    );
    let open = crate::support::ops_of_step0(&last_export(dir.path()));
    assert!(open["buy"].0 > 10 && open["buy"].1.is_empty(), "{open:?}");
}

#[test]
fn bad_flows_are_refused_in_one_line_naming_file_and_line() {
    let dir = tempdir();
    let file = write_flow(dir.path(), "1s");
    let flow = file.to_str().unwrap();
    let other = dir.path().join("other.flow");
    std::fs::write(&other, "GET http://127.0.0.2:80/x\n").unwrap();
    refused(
        &[
            "run",
            "web",
            "--target",
            "http://127.0.0.1:9/",
            "--flow",
            other.to_str().unwrap(),
        ],
        &[
            "--flow: ",
            "other.flow:1: http://127.0.0.2:80 is not the run's target",
        ],
    );
    let used = dir.path().join("used.flow");
    std::fs::write(&used, "GET /a?t=${t}\ncapture t header X-T\n").unwrap();
    refused(
        &[
            "run",
            "web",
            "--target",
            "http://127.0.0.1:9/",
            "--flow",
            used.to_str().unwrap(),
        ],
        &["used.flow:1: ${t} is used before a reply sets it"],
    );
    refused(
        &[
            "run",
            "web",
            "--target",
            "http://127.0.0.1:9/",
            "--flow",
            "nowhere.flow",
        ],
        &["--flow: nowhere.flow: "],
    );
    let (_, err) = perflab_expect(
        dir.path(),
        &format!("run web --target http://127.0.0.1:9/ --flow {flow} --targets {flow}"),
        2,
    );
    contains(&err, "--flow");
    // A flow whose server is not there ends in one line before the run.
    let (_, err) = perflab_expect(
        dir.path(),
        &format!("run web --target http://127.0.0.1:9/ --flow {flow} --duration 1s"),
        2,
    );
    contains(&err, "nothing accepts connections at 127.0.0.1:9");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
