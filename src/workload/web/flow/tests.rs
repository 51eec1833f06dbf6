use super::user::Target;
use super::*;
use crate::sut::http::HttpBase;

const SHOP: &str = "\
# A shopper's journey.
data users.csv
redirects follow

# name: login
POST /login
Content-Type: application/x-www-form-urlencoded
@login.txt
capture token json $.token

# name: browse
GET /items?page=${iteration}
Authorization: Bearer ${token}
capture item json $.items[0].id
think exp:1s

# name: buy
POST /cart/${item}
X-User: ${name}
";

fn base() -> HttpBase {
    HttpBase::parse("http://127.0.0.1:8080/shop/").unwrap()
}

fn parse_shop(text: &str, csv: &str) -> Result<(Targets, Flow), String> {
    let bases = [base()];
    let csv = csv.to_string();
    parse(
        text,
        "shop.flow",
        Allowed::Bases(&bases),
        |p| {
            assert_eq!(p, Path::new("login.txt"));
            Ok(b"user=${name}&pass=${password}".to_vec())
        },
        move |p| {
            assert_eq!(p, Path::new("users.csv"));
            Ok(csv.clone().into_bytes())
        },
    )
}

const USERS: &str = "name,password\nann,\"p,1\"\nbob,\"say \"\"hi\"\"\"\n";

/// Where a test user's requests go.
fn to_of<'a>(
    base: &'a HttpBase,
    authority: &'a str,
    common: &'a [(String, String)],
    close: bool,
) -> Target<'a> {
    Target {
        base,
        authority,
        common,
        close,
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_flow_is_parsed_into_steps_with_their_variables() {
    let (targets, flow) = parse_shop(SHOP, USERS).unwrap();
    assert_eq!(targets.names, ["login", "browse", "buy"]);
    assert_eq!(flow.columns, ["name", "password"]);
    assert_eq!(flow.rows.len(), 2);
    assert_eq!(&*flow.rows[0][1], b"p,1");
    assert_eq!(&*flow.rows[1][1], b"say \"hi\"");
    assert_eq!(flow.captured, ["token", "item"]);
    assert!(flow.follow_redirects && flow.cookies);
    assert!(flow.steps[0].keeps_body);
    assert_eq!(
        flow.steps[1].think,
        ThinkTime::Exponential {
            mean: std::time::Duration::from_secs(1)
        }
    );
    assert_eq!(flow.steps[2].path[1], Piece::Var(Var::Captured(1)));
}

#[test]
fn a_user_walks_its_journey_capturing_and_sending_on() {
    let (_, flow) = parse_shop(SHOP, USERS).unwrap();
    let b = base();
    let common = [("X-Run".to_string(), "7".to_string())];
    let to = to_of(&b, "127.0.0.1:8080", &common, false);
    let mut user = FlowUser::new(&flow, 3);
    user.render(&flow, &to);
    let login = text(&user.request);
    assert!(login.starts_with("POST /shop/login HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"));
    assert!(login.contains("X-Run: 7\r\n"));
    assert!(login.ends_with("Content-Length: 22\r\n\r\nuser=bob&pass=say \"hi\""));
    let head =
        b"HTTP/1.1 200 OK\r\nSet-Cookie: sid=abc; Path=/; HttpOnly\r\nContent-Length: 20\r\n\r\n";
    assert!(user.after(&flow, head, br#"{"token": "t-\u0031"}"#, true));
    user.render(&flow, &to);
    let browse = text(&user.request);
    assert!(
        browse.starts_with("GET /shop/items?page=0 HTTP/1.1\r\n"),
        "{browse}"
    );
    assert!(browse.contains("Authorization: Bearer t-1\r\n"));
    assert!(browse.contains("Cookie: sid=abc\r\n"));
    assert!(!browse.contains("Content-Length"));
    // No item in the reply: a capture error, and the journey begins again.
    assert!(!user.after(&flow, b"HTTP/1.1 200 OK\r\n\r\n", br#"{"items": []}"#, true));
    user.render(&flow, &to);
    assert!(text(&user.request).starts_with("POST /shop/login "));
    assert!(
        !text(&user.request).contains("Cookie:"),
        "cookies forgotten"
    );
    assert!(user.after(&flow, head, br#"{"token":"t2"}"#, true));
    assert!(user.after(
        &flow,
        b"HTTP/1.1 200 OK\r\n\r\n",
        br#"{"items":[{"id":"a b/9"}]}"#,
        true
    ));
    assert!(
        user.pause(&mut rand::rngs::mock::StepRng::new(0, 1)) < std::time::Duration::from_millis(1)
    );
    user.render(&flow, &to);
    let buy = text(&user.request);
    assert!(
        buy.starts_with("POST /shop/cart/a%20b/9 HTTP/1.1\r\n"),
        "{buy}"
    );
    assert!(buy.contains("X-User: bob\r\n"));
    assert!(buy.contains("Content-Length: 0\r\n"));
    assert!(user.after(&flow, b"HTTP/1.1 201 Created\r\n\r\n", b"", true));
    user.render(&flow, &to);
    assert!(text(&user.request).starts_with("POST /shop/login "));
    // A failed request also begins the journey again, and is no capture error.
    assert!(user.after(&flow, b"", b"", false));
    assert_eq!(user.step, 0);
}

#[test]
fn cookies_are_kept_replaced_and_expired() {
    let flow = parse_shop("GET /a\n", "").unwrap().1;
    let mut user = FlowUser::new(&flow, 0);
    user.keep_cookies(b"HTTP/1.1 200 OK\r\nset-cookie: a=1\r\nSet-Cookie: b = 2 ; Secure\r\n\r\n");
    user.keep_cookies(b"HTTP/1.1 200 OK\r\nSet-Cookie: a=3\r\nSet-Cookie: b=; Max-Age=0\r\nSet-Cookie: junk\r\n\r\n");
    let b = base();
    let to = to_of(&b, "h:1", &[], true);
    user.render(&flow, &to);
    let r = text(&user.request);
    assert!(r.contains("Cookie: a=3\r\nConnection: close\r\n"), "{r}");
}

#[test]
fn redirects_are_followed_on_the_target_only() {
    let (_, flow) = parse_shop(SHOP, USERS).unwrap();
    let b = base();
    let to = to_of(&b, "127.0.0.1:8080", &[], false);
    let mut user = FlowUser::new(&flow, 0);
    user.render(&flow, &to);
    let r = user
        .redirect(
            &flow,
            b"HTTP/1.1 303 See Other\r\nLocation: /home?x=1\r\n\r\n",
            303,
            &to,
        )
        .unwrap();
    assert!(!r.head);
    let home = text(&user.request);
    assert!(home.starts_with("GET /home?x=1 HTTP/1.1\r\n"), "{home}");
    assert!(!home.contains("Content-Type") && !home.contains("Content-Length"));
    user.render(&flow, &to);
    user.redirect(
        &flow,
        b"HTTP/1.1 307 Temporary\r\nLocation: http://127.0.0.1:8080/again\r\n\r\n",
        307,
        &to,
    )
    .unwrap();
    let again = text(&user.request);
    assert!(again.starts_with("POST /again HTTP/1.1\r\n"));
    // A relative Location resolves against the request it answers.
    user.redirect(
        &flow,
        b"HTTP/1.1 302 Found\r\nLocation: ../next?b=2#top\r\n\r\n",
        302,
        &to,
    )
    .unwrap();
    let next = text(&user.request);
    assert!(next.starts_with("GET /next?b=2 HTTP/1.1\r\n"), "{next}");
    assert!(again.ends_with("\r\n\r\nuser=ann&pass=p,1"), "{again}");
    for elsewhere in [
        "http://example.com/x",
        "https://127.0.0.1:8080/x",
        "//example.com/x",
    ] {
        let head = format!("HTTP/1.1 302 Found\r\nLocation: {elsewhere}\r\n\r\n");
        assert!(
            user.redirect(&flow, head.as_bytes(), 302, &to).is_none(),
            "{elsewhere}"
        );
    }
}

#[test]
fn a_capture_refuses_what_cannot_be_sent_on() {
    let flow = parse_shop(
        "GET /a\ncapture h header X-Token\ncapture c cookie sid\n\nGET /b/${h}/${c}\n",
        "",
    )
    .unwrap()
    .1;
    let mut user = FlowUser::new(&flow, 0);
    assert!(user.after(
        &flow,
        b"HTTP/1.1 200 OK\r\nx-token:  v1 \r\nSet-Cookie: sid=s1\r\n\r\n",
        b"",
        true
    ));
    let mut user = FlowUser::new(&flow, 0);
    assert!(!user.after(
        &flow,
        b"HTTP/1.1 200 OK\r\nSet-Cookie: sid=s1\r\n\r\n",
        b"",
        true
    ));
    let long = format!(
        "HTTP/1.1 200 OK\r\nX-Token: {}\r\nSet-Cookie: sid=s\r\n\r\n",
        "x".repeat(MAX_VALUE + 1)
    );
    assert!(!user.after(&flow, long.as_bytes(), b"", true));
}

#[test]
fn bad_flows_are_refused_naming_file_and_line() {
    let cases: [(&str, &str); 12] = [
        ("GET /a\ncapture\n", "shop.flow:2: a capture line is"),
        (
            "capture t json $.a\nGET /a\n",
            "shop.flow:1: 'capture' belongs to a request",
        ),
        (
            "GET /a\ndata users.csv\n",
            "shop.flow:2: 'data' is the whole flow's",
        ),
        ("GET /a\ncapture t xml a\n", "shop.flow:2: 'capture t xml'"),
        (
            "GET /a\ncapture 1t json $.a\n",
            "shop.flow:2: '1t' is not a variable name",
        ),
        ("GET /a\ncapture user json $.a\n", "perflab's own variable"),
        ("GET /a\nthink soon\n", "shop.flow:2: think:"),
        (
            "GET /a\nthink 1s\nthink 2s\n",
            "shop.flow:3: a second think line",
        ),
        (
            "redirects maybe\nGET /a\n",
            "shop.flow:1: 'redirects maybe'",
        ),
        (
            "GET /a/${t}\ncapture t json $.a\n",
            "shop.flow:1: ${t} is used before a reply sets it",
        ),
        (
            "GET /a\n\nGET /b/${nope}\n",
            "shop.flow:3: ${nope} is not set",
        ),
        ("GET /a/${t\n", "shop.flow:1: '${' without its closing '}'"),
    ];
    for (flow, want) in cases {
        let err = parse_shop(flow, USERS).unwrap_err();
        assert!(err.contains(want), "{flow:?}: {err}");
    }
    for (csv, want) in [
        ("", "is empty"),
        ("name\n", "no row"),
        (
            "name,pw\nann\n",
            "line 2: 1 fields where the header names 2",
        ),
        ("na me\nx\n", "not a variable name"),
        ("name\n\"ann\n", "not closed"),
    ] {
        let err = parse_shop("data users.csv\nGET /a\n", csv).unwrap_err();
        assert!(
            err.starts_with("shop.flow:1: the data file users.csv: "),
            "{err}"
        );
        assert!(err.contains(want), "{csv:?}: {err}");
    }
    // The targets file's own refusals keep their line.
    let err = parse_shop("GET /a\ncapture t json $.a\nbad header\n", "").unwrap_err();
    assert!(err.starts_with("shop.flow:3: "), "{err}");
}

#[test]
fn a_users_journeys_allocate_nothing_after_the_first() {
    use crate::util::counting_alloc::allocations;
    let (_, flow) = parse_shop(SHOP, USERS).unwrap();
    let b = base();
    let to = to_of(&b, "127.0.0.1:8080", &[], false);
    let login = b"HTTP/1.1 200 OK\r\nSet-Cookie: sid=abc\r\nSet-Cookie: lang=en\r\n\r\n";
    let replies: [(&[u8], &[u8]); 3] = [
        (login, br#"{"token": "t-1"}"#),
        (b"HTTP/1.1 200 OK\r\n\r\n", br#"{"items": [{"id": 12345}]}"#),
        (
            b"HTTP/1.1 201 Created\r\nSet-Cookie: sid=; Max-Age=0\r\n\r\n",
            b"",
        ),
    ];
    let mut user = FlowUser::new(&flow, 7);
    let mut rng = rand::rngs::mock::StepRng::new(1 << 60, 1 << 40);
    let mut journey = |user: &mut FlowUser| {
        for (head, body) in replies {
            user.render(&flow, &to);
            assert!(user.after(&flow, head, body, true));
            let _ = user.pause(&mut rng);
        }
    };
    for _ in 0..3 {
        journey(&mut user);
    }
    let before = allocations();
    for _ in 0..1_000 {
        journey(&mut user);
    }
    assert_eq!(allocations() - before, 0, "allocations in 1,000 journeys");
    assert_eq!(user.step, 0);
}
