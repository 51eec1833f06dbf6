//! The targets file's parser: what it takes, what it refuses (in one line
//! naming the line), and arbitrary text (never a panic, sizes bounded).

use super::*;
use proptest::prelude::*;

fn bases() -> Vec<HttpBase> {
    vec![HttpBase::parse("http://127.0.0.1:8080/app/").unwrap()]
}

/// Parses with bodies from a map of names to contents.
fn parse_with(text: &str, bodies: &[(&str, &[u8])]) -> Result<Targets, String> {
    let b = bases();
    parse(text, "t.txt", Allowed::Bases(&b), |p| {
        bodies
            .iter()
            .find(|(n, _)| Path::new(n) == p)
            .map(|(_, b)| b.to_vec())
            .ok_or_else(|| format!("{}: No such file or directory", p.display()))
    })
}

#[test]
fn blocks_headers_bodies_and_names_are_read() {
    let text = "# a comment\nGET /index.html\nAccept: text/html\n\n# name: create\nPOST http://127.0.0.1:8080/api/items?x=1\nContent-Type: application/json\n@item.json\n\nDELETE /api/items/1\nHEAD /index.html?v=2\nGET /index.html?v=3\n";
    let t = parse_with(text, &[("item.json", b"{\"a\":1}")]).unwrap();
    assert_eq!(t.requests.len(), 5);
    assert_eq!(
        t.names,
        [
            "GET /index.html",
            "create",
            "DELETE /api/items/1",
            "HEAD /index.html"
        ]
    );
    // The query is not part of a default name: one endpoint, one kind.
    assert_eq!(t.kinds, [0, 1, 2, 3, 0]);
    let post = &t.requests[1];
    assert_eq!(post.place, Place::Absolute("/api/items?x=1".into()));
    assert_eq!(post.body.as_deref(), Some(&b"{\"a\":1}"[..]));
    assert_eq!(t.body_bytes, 7);
    let bytes = render(post, &bases()[0], &[("X-Run".into(), "1".into())], false);
    let text = String::from_utf8(bytes).unwrap();
    assert!(
        text.starts_with("POST /api/items?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "X-Run: 1\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}"
        ),
        "{text}"
    );
    // A relative path is joined to the base's path; a GET has no length.
    let get = String::from_utf8(render(&t.requests[0], &bases()[0], &[], true)).unwrap();
    assert!(get.starts_with("GET /app/index.html HTTP/1.1\r\n"), "{get}");
    assert!(
        get.contains("Accept: text/html\r\n") && !get.contains("*/*"),
        "{get}"
    );
    assert!(get.ends_with("Connection: close\r\n\r\n") && !get.contains("Content-Length"));
    assert!(is_head(&t.requests[3]));
}

#[test]
fn a_post_without_a_body_says_its_length_is_zero() {
    let t = parse_with("POST /login\n", &[]).unwrap();
    let text = String::from_utf8(render(&t.requests[0], &bases()[0], &[], false)).unwrap();
    assert!(text.ends_with("Content-Length: 0\r\n\r\n"), "{text}");
}

#[test]
fn bad_lines_are_refused_naming_file_and_line() {
    for (text, line, says) in [
        ("FETCH /x\n", 1, "unknown method 'FETCH'"),
        ("GET http://10.0.0.1:8080/x\n", 1, "not the run's target"),
        ("GET http://127.0.0.1:9090/x\n", 1, "not the run's target"),
        ("GET https://127.0.0.1:8080/x\n", 1, "not the run's target"),
        ("GET /x\nX-Foo value\n", 2, "not a header line"),
        ("GET /x\nBad Name: v\n", 2, "not an HTTP token"),
        ("GET /x\nHost: other\n", 2, "perflab sets Host itself"),
        ("POST /x\n@missing.json\n", 2, "missing.json: No such file"),
        ("GET /x\n@a.json\n", 2, "a GET request carries no body"),
        ("POST /x\n@a.json\n@a.json\n", 3, "a second @body"),
        ("POST /x\n@a.json\nX-A: 1\n", 3, "header after the @body"),
        ("GET /x\n\nX-A: 1\n", 3, "is not METHOD URL"),
        ("GET /x y\n", 1, "two words"),
        ("GET x\n", 1, "neither a path"),
        ("GET ftp://127.0.0.1/x\n", 1, "neither a path"),
        ("GET /x#frag\n", 1, "fragment"),
        ("# only a comment\n", 1, "lists no request"),
        ("GET /x\n# name: orphan\n", 2, "names no request"),
        ("# name:\nGET /x\n", 1, "gives no name"),
        ("@a.json\n", 1, "outside a request"),
    ] {
        let err = parse_with(text, &[("a.json", b"{}")]).unwrap_err();
        assert!(
            err.starts_with(&format!("t.txt:{line}: ")) && err.contains(says),
            "{text:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn a_managed_server_takes_paths_only_and_names_are_bounded() {
    let err = parse(
        "GET http://127.0.0.1:8080/x\n",
        "t.txt",
        Allowed::Managed,
        |_| Err("none".into()),
    )
    .unwrap_err();
    assert!(err.contains("give paths"), "{err}");
    let many: String = (0..=MAX_NAMES).map(|i| format!("GET /p{i}\n")).collect();
    let err = parse_with(&many, &[]).unwrap_err();
    assert!(err.contains("at most 64"), "{err}");
    // The same paths under a few names are fine.
    let named: String = (0..=MAX_NAMES)
        .map(|i| format!("# name: page\nGET /p{i}\n"))
        .collect();
    assert_eq!(parse_with(&named, &[]).unwrap().names, ["page"]);
    let long = format!("GET /{}\n", "a".repeat(500));
    let t = parse_with(&long, &[]).unwrap();
    assert_eq!(t.names[0].chars().count(), MAX_NAME);
}

#[test]
fn body_files_are_bounded_alone_and_together_and_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(MAX_BODY + 1)
        .unwrap();
    let file = dir.path().join("t.txt");
    std::fs::write(&file, "POST /x\n@big\n").unwrap();
    let err = read(&file, Allowed::Bases(&bases())).unwrap_err();
    assert!(
        err.contains("longer than 16.0 MiB") && err.contains(":2:"),
        "{err}"
    );
    // Five 15 MiB files pass one by one, not together; one file named
    // twice is read once.
    let mut text = String::new();
    for i in 0..5 {
        std::fs::File::create(dir.path().join(format!("b{i}")))
            .unwrap()
            .set_len(15 << 20)
            .unwrap();
        text.push_str(&format!("PUT /x\n@b{i}\n\n"));
    }
    std::fs::write(&file, &text).unwrap();
    let err = read(&file, Allowed::Bases(&bases())).unwrap_err();
    assert!(err.contains("add up to more than 64.0 MiB"), "{err}");
    std::fs::write(&file, "PUT /x\n@b0\n\nPATCH /y\n@b0\n").unwrap();
    let t = read(&file, Allowed::Bases(&bases())).unwrap();
    assert_eq!(t.body_bytes, 15 << 20);
    assert!(Arc::ptr_eq(
        t.requests[0].body.as_ref().unwrap(),
        t.requests[1].body.as_ref().unwrap()
    ));
}

/// Lines that look like a targets file's, and some that do not.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "(GET|POST|PUT|HEAD|DELETE|FETCH|get) (/[a-z?=%/]{0,12}|http://127\\.0\\.0\\.1:80(80|81)/[a-z]{0,4}|[a-z:/]{0,10})",
        "[A-Za-z-]{0,8}: ?[ -~]{0,10}",
        "@[ab]?\\.?json",
        "# ?(name: ?)?[ -~]{0,10}",
        "[ -~\t\r]{0,20}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn files_never_panic_and_stay_bounded(lines in prop::collection::vec(line(), 0..24)) {
        let text = lines.join("\n");
        match parse_with(&text, &[("a.json", b"{}"), ("b.json", b"[1]")]) {
            Ok(t) => {
                prop_assert!(!t.requests.is_empty() && t.requests.len() <= lines.len());
                prop_assert!(t.names.len() <= MAX_NAMES && t.kinds.len() == t.requests.len());
                prop_assert!(t.kinds.iter().all(|&k| k < t.names.len()));
                for r in &t.requests {
                    // Every request renders to one head of lines and its body.
                    let bytes = render(r, &bases()[0], &[], false);
                    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
                    prop_assert_eq!(bytes.len() - end - 4, r.body.as_ref().map_or(0, |b| b.len()));
                    let mut headers = [httparse::EMPTY_HEADER; 80];
                    let mut req = httparse::Request::new(&mut headers);
                    prop_assert!(req.parse(&bytes).map(|s| s.is_complete()).unwrap_or(false));
                }
            }
            Err(e) => {
                prop_assert!(e.starts_with("t.txt:") && e.lines().count() == 1, "{}", e);
            }
        }
    }

    #[test]
    fn any_text_never_panics(text in any::<String>()) {
        if let Err(e) = parse_with(&text, &[]) {
            prop_assert_eq!(e.lines().count(), 1);
        }
    }
}
