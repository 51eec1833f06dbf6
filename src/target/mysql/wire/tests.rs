//! The MySQL/MariaDB session against bytes laid out as the protocol
//! says, and against scripted peers on loopback that misbehave.

use super::*;
use std::io::{Read, Write};
use std::time::Duration;

#[test]
fn the_native_password_token_is_the_protocols() {
    // Computed independently (Python's hashlib) for this password and
    // scramble: sha1(pw) XOR sha1(scramble + sha1(sha1(pw))).
    let scramble = b"abcdefghij0123456789";
    let token = auth_token("mysql_native_password", b"bank-pw", scramble).unwrap();
    let hex: String = token.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, NATIVE_TOKEN);
    assert_eq!(
        auth_token("mysql_native_password", b"", scramble),
        Some(Vec::new())
    );
    assert_eq!(auth_token("client_ed25519", b"x", scramble), None);
}

const NATIVE_TOKEN: &str = "ac64a1a5090e037b40b8a32f4875cae7bc0cdf72";

#[test]
fn an_execute_template_carries_its_parameters_where_the_protocol_says() {
    let c = Command::execute(7, 2);
    assert_eq!(c.arity(), 2);
    // Header, 0x17, id, flags, iterations, bitmap, bound flag, types.
    assert_eq!(&c.packet[4..10], &[0x17, 7, 0, 0, 0, 0]);
    assert_eq!(&c.packet[14..20], &[0, 1, 8, 0, 8, 0]);
    assert_eq!(c.params, vec![20, 28]);
    assert_eq!(c.packet.len(), 36);
    assert_eq!(usize::from(c.packet[0]), c.packet.len() - 4);
}

#[test]
fn replies_are_scanned_whole_or_not_at_all() {
    let ok = packet(1, &[0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00]);
    assert_eq!(
        scan(&ok, true).unwrap(),
        Some((
            ok.len(),
            Ok(Reply {
                affected: 1,
                rows: 0
            })
        ))
    );
    assert_eq!(scan(&ok[..ok.len() - 1], true).unwrap(), None);
    let err = packet(1, b"\xff\xbd\x04#40001Deadlock found");
    assert_eq!(scan(&err, true).unwrap(), Some((err.len(), Err(1213))));
    assert_eq!(error_message(&err[4..]), "Deadlock found");
    // One column, its definition, one binary row, the closing OK.
    let mut set = packet(1, &[1]);
    set.extend(packet(2, b"\x03def\x00\x08accounts"));
    set.extend(packet(3, &[0, 0, 42, 0, 0, 0, 0, 0, 0, 0]));
    set.extend(packet(4, &[0xFE, 0, 0, 2, 0, 0, 0]));
    assert_eq!(
        scan(&set, true).unwrap(),
        Some((
            set.len(),
            Ok(Reply {
                affected: 0,
                rows: 1
            })
        ))
    );
    for cut in 1..set.len() {
        assert_eq!(scan(&set[..cut], true).unwrap(), None, "cut at {cut}");
    }
    // Without DEPRECATE_EOF an EOF packet follows the definitions.
    let mut old = packet(1, &[1]);
    old.extend(packet(2, b"\x03def"));
    old.extend(packet(3, &[0xFE, 0, 0, 2, 0]));
    old.extend(packet(4, &[0, 0, 42, 0, 0, 0, 0, 0, 0, 0]));
    old.extend(packet(5, &[0xFE, 0, 0, 2, 0]));
    assert_eq!(
        scan(&old, false).unwrap(),
        Some((
            old.len(),
            Ok(Reply {
                affected: 0,
                rows: 1
            })
        ))
    );
    // A 16 MB length, an infile request, an empty packet: nonsense.
    assert!(scan(&[0xFF, 0xFF, 0xFF, 0, 1], true).is_err());
    assert!(scan(&packet(1, &[0xFB, b'x']), true).is_err());
    assert!(scan(&packet(1, &[]), true).is_err());
}

/// A greeting as MariaDB sends it: protocol 10, version, connection id,
/// scramble in two parts, capabilities, and the method's name.
fn greeting(plugin: &str) -> Vec<u8> {
    let caps: u32 = CLIENT_LONG_PASSWORD
        | CLIENT_CONNECT_WITH_DB
        | CLIENT_PROTOCOL_41
        | CLIENT_TRANSACTIONS
        | CLIENT_SECURE_CONNECTION
        | CLIENT_PLUGIN_AUTH
        | CLIENT_DEPRECATE_EOF;
    let mut p = vec![10];
    p.extend_from_slice(b"10.11.19-MariaDB\0");
    p.extend_from_slice(&9u32.to_le_bytes());
    p.extend_from_slice(b"abcdefgh\0");
    p.extend_from_slice(&(caps as u16).to_le_bytes());
    p.push(CHARSET);
    p.extend_from_slice(&2u16.to_le_bytes());
    p.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
    p.push(21);
    p.extend_from_slice(&[0; 10]);
    p.extend_from_slice(b"ij0123456789\0");
    p.extend_from_slice(plugin.as_bytes());
    p.push(0);
    packet(0, &p)
}

#[test]
fn a_greeting_gives_its_scramble_capabilities_and_method() {
    let g = greeting("mysql_native_password");
    let hello = Greeting::parse(&g[4..]).unwrap();
    assert_eq!(hello.scramble, b"abcdefghij0123456789");
    assert_eq!(hello.plugin, "mysql_native_password");
    assert!(hello.capabilities & CLIENT_DEPRECATE_EOF != 0);
    for cut in 0..g.len() - 4 {
        // Cut anywhere, it is refused or read, never a panic.
        let _ = Greeting::parse(&g[4..4 + cut]);
    }
}

/// Why connecting to `url` failed.
fn refused(url: &str) -> String {
    let target = super::super::resolve(url, &|_| None).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let e = rt.block_on(MyWire::connect(&target)).err().unwrap();
    e.to_string()
}

#[test]
fn a_login_method_not_spoken_here_is_one_line_naming_the_fix() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let _ = stream.write_all(&greeting("client_ed25519"));
            let _ = stream.read(&mut [0u8; 512]);
        }
    });
    let e = refused(&format!("mysql://u:pw@127.0.0.1:{port}/db"));
    assert!(
        e.contains("client_ed25519") && e.contains("mysql_native_password"),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn tls_in_the_url_is_refused_before_connecting() {
    let e = refused("mysql://u:pw@127.0.0.1:9/db?require_ssl=true");
    assert!(
        e.contains("TLS") && e.contains("drop the ssl options"),
        "{e}"
    );
}

/// A server on loopback that greets, accepts any login, answers the
/// one prepare, then hands the stream to `script`.
fn scripted(script: impl FnOnce(&mut std::net::TcpStream) + Send + 'static) -> MyTarget {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else {
            return;
        };
        let mut buf = [0u8; 4096];
        let ok = packet(2, &[0, 0, 0, 2, 0, 0, 0]);
        // Statement 1: no columns, one parameter and its definition.
        let mut prepared = packet(1, &[0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]);
        prepared.extend(packet(2, b"\x03def"));
        if stream
            .write_all(&greeting("mysql_native_password"))
            .is_err()
        {
            return;
        }
        for answer in [ok, prepared] {
            if stream.read(&mut buf).unwrap_or(0) == 0 || stream.write_all(&answer).is_err() {
                return;
            }
        }
        script(&mut stream);
    });
    super::super::resolve(&format!("mysql://u:pw@127.0.0.1:{port}/db"), &|_| None).unwrap()
}

/// Answers each later command with the next of `replies` (then closes).
fn peer(replies: Vec<Vec<u8>>) -> MyTarget {
    scripted(move |stream| {
        let mut buf = [0u8; 4096];
        for answer in &replies {
            if stream.read(&mut buf).unwrap_or(0) == 0 || stream.write_all(answer).is_err() {
                return;
            }
        }
    })
}

/// Two executions on one connection, the first abandoned after 50 ms
/// when `abandon_first`; with the socket `held` (each operation allowed
/// 150 ms), the first then times out.
fn exchange(target: &MyTarget, abandon_first: bool, held: bool) -> Vec<Result<Reply, MyError>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut wire = MyWire::connect(target).await.unwrap();
        let st = wire.prepare(target, "SELECT ?").await.unwrap();
        if held {
            wire = wire.hold(Duration::from_millis(150)).unwrap();
        }
        let mut out = Vec::new();
        for i in 0..2 {
            wire.begin_operation();
            if i == 0 && abandon_first && held {
                assert_eq!(wire.run(&st, &[i]).await, Err(MyError::TimedOut));
                assert!(!wire.is_broken());
                continue;
            }
            if i == 0 && abandon_first {
                let cut =
                    tokio::time::timeout(Duration::from_millis(50), wire.run(&st, &[i])).await;
                assert!(cut.is_err(), "the first exchange was to be abandoned");
                continue;
            }
            out.push(wire.run(&st, &[i]).await);
        }
        out
    })
}

#[test]
fn hostile_replies_end_the_connection_not_the_process() {
    for garbage in [
        vec![0xFF, 0xFF, 0xFF, 1, 0, 0],
        packet(1, &[0x00, 0x01])[..5].to_vec(),
        b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec(),
    ] {
        for held in [false, true] {
            let results = exchange(&peer(vec![garbage.clone()]), false, held);
            assert_eq!(
                results,
                vec![Err(MyError::Lost), Err(MyError::Lost)],
                "{garbage:?} held {held}"
            );
        }
    }
}

#[test]
fn a_server_error_is_its_code_and_the_connection_goes_on() {
    let deadlock = packet(1, b"\xff\xbd\x04#40001Deadlock found");
    let ok = packet(1, &[0, 1, 0, 2, 0, 0, 0]);
    for held in [false, true] {
        let results = exchange(&peer(vec![deadlock.clone(), ok.clone()]), false, held);
        assert_eq!(
            results,
            vec![
                Err(MyError::Server(1213)),
                Ok(Reply {
                    affected: 1,
                    rows: 0
                })
            ]
        );
    }
}

#[test]
fn an_abandoned_or_timed_out_exchange_is_settled_before_the_next() {
    // The first reply comes after its caller gave up (or, held, after its
    // deadline); the second execution reads and drops it, then gets its own.
    for held in [false, true] {
        let results = exchange(&late_peer(), true, held);
        assert_eq!(
            results,
            vec![Ok(Reply {
                affected: 3,
                rows: 0
            })]
        );
    }
}

/// Answers the first execution 200 ms late and the second at once.
fn late_peer() -> MyTarget {
    scripted(|stream| {
        let mut buf = [0u8; 4096];
        if stream.read(&mut buf).unwrap_or(0) == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
        let _ = stream.write_all(&packet(1, &[0, 1, 0, 2, 0, 0, 0]));
        if stream.read(&mut buf).unwrap_or(0) > 0 {
            let _ = stream.write_all(&packet(1, &[0, 3, 0, 2, 0, 0, 0]));
        }
    })
}
