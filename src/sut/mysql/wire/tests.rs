//! The MySQL/MariaDB session against bytes laid out as the protocol
//! says, and against scripted peers on loopback that misbehave.

use super::startup::*;
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
        scan(&ok, true, MAX_REPLY).unwrap(),
        Some((
            ok.len(),
            Ok(Reply {
                affected: 1,
                rows: 0
            })
        ))
    );
    assert_eq!(scan(&ok[..ok.len() - 1], true, MAX_REPLY).unwrap(), None);
    let err = packet(1, b"\xff\xbd\x04#40001Deadlock found");
    assert_eq!(
        scan(&err, true, MAX_REPLY).unwrap(),
        Some((err.len(), Err(1213)))
    );
    assert_eq!(error_message(&err[4..]), "Deadlock found");
    // One column, its definition, one binary row, the closing OK.
    let mut set = packet(1, &[1]);
    set.extend(packet(2, b"\x03def\x00\x08accounts"));
    set.extend(packet(3, &[0, 0, 42, 0, 0, 0, 0, 0, 0, 0]));
    set.extend(packet(4, &[0xFE, 0, 0, 2, 0, 0, 0]));
    assert_eq!(
        scan(&set, true, MAX_REPLY).unwrap(),
        Some((
            set.len(),
            Ok(Reply {
                affected: 0,
                rows: 1
            })
        ))
    );
    for cut in 1..set.len() {
        assert_eq!(
            scan(&set[..cut], true, MAX_REPLY).unwrap(),
            None,
            "cut at {cut}"
        );
    }
    // Without DEPRECATE_EOF an EOF packet follows the definitions.
    let mut old = packet(1, &[1]);
    old.extend(packet(2, b"\x03def"));
    old.extend(packet(3, &[0xFE, 0, 0, 2, 0]));
    old.extend(packet(4, &[0, 0, 42, 0, 0, 0, 0, 0, 0, 0]));
    old.extend(packet(5, &[0xFE, 0, 0, 2, 0]));
    assert_eq!(
        scan(&old, false, MAX_REPLY).unwrap(),
        Some((
            old.len(),
            Ok(Reply {
                affected: 0,
                rows: 1
            })
        ))
    );
    // A packet out of sequence (the reply's first, or one within it) was
    // sent for another exchange.
    assert!(scan(&packet(2, &[0, 1, 0, 2, 0, 0, 0]), true, MAX_REPLY).is_err());
    let mut skipped = set.clone();
    // The second packet (the column definition) numbered 9, not 2.
    skipped[5 + 3] = 9;
    assert!(scan(&skipped, true, MAX_REPLY).is_err());
    // A 16 MB length, an infile request, an empty packet: nonsense.
    assert!(scan(&[0xFF, 0xFF, 0xFF, 0, 1], true, MAX_REPLY).is_err());
    assert!(scan(&packet(1, &[0xFB, b'x']), true, MAX_REPLY).is_err());
    assert!(scan(&packet(1, &[]), true, MAX_REPLY).is_err());
}

#[test]
fn a_text_result_gives_its_first_row_and_a_reply_over_the_limit_is_too_large() {
    // Two columns, their definitions, two text rows (a NULL, then a
    // value of 3 bytes), the closing EOF; with and without DEPRECATE_EOF.
    for deprecate_eof in [true, false] {
        let eof: &[u8] = &[0xFE, 0, 0, 2, 0];
        let payloads: Vec<&[u8]> = [
            &[2][..],
            b"\x03def\x00\x00\x00\x05stock\x00",
            b"\x03def\x00\x00\x00\x05price\x00",
        ]
        .into_iter()
        .chain((!deprecate_eof).then_some(eof))
        .chain([
            &b"\xfb\x033.5"[..],
            b"\x0212\x011",
            &[0xFE, 0, 0, 2, 0, 0, 0],
        ])
        .collect();
        let set: Vec<u8> = (1u8..)
            .zip(payloads)
            .flat_map(|(seq, p)| packet(seq, p))
            .collect();
        let (len, reply) = scan(&set, deprecate_eof, MAX_REPLY).unwrap().unwrap();
        assert_eq!(
            (len, reply),
            (
                set.len(),
                Ok(Reply {
                    affected: 0,
                    rows: 2
                })
            )
        );
        let (start, end) = first_row_at(&set).unwrap();
        let values: Vec<Option<&[u8]>> = row_values(&set[start..end]).collect();
        assert_eq!(values, vec![None, Some(&b"3.5"[..])]);
        // The same reply is too large for a limit below its length: an
        // InvalidInput error, which the connection reports as TooLarge.
        let e = scan(&set, deprecate_eof, set.len() - 1).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    }
    // No row: nothing to keep; an OK packet: nothing either.
    let mut empty = packet(1, &[1]);
    empty.extend(packet(2, b"\x03def\x00\x00\x00\x01x\x00"));
    empty.extend(packet(3, &[0xFE, 0, 0, 2, 0, 0, 0]));
    assert_eq!(first_row_at(&empty), None);
    assert_eq!(first_row_at(&packet(1, &[0, 1, 0, 2, 0, 0, 0])), None);
    // A value whose length runs past the row ends the values there.
    assert_eq!(row_values(b"\x05ab").count(), 0);
    assert_eq!(row_values(b"\x01a\xfc\xff").count(), 1);
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
            wire = wire
                .drive(crate::sut::stream::Drive::Held(Duration::from_millis(150)))
                .unwrap();
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

/// What one text query gave: its reply and its first row's values.
type Kept = Result<(Reply, Vec<Option<Vec<u8>>>), MyError>;

/// A script's text query on a connection to `target` (after the one
/// prepare the peer answers), `n` times.
fn text_queries(target: &MyTarget, n: usize) -> Vec<Kept> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut wire = MyWire::connect(target).await.unwrap();
        wire.prepare(target, "SELECT ?").await.unwrap();
        wire.accept_replies(MAX_SCRIPT_REPLY);
        let mut row = Vec::new();
        let mut out = Vec::new();
        for _ in 0..n {
            let reply = wire.query_keeping("SELECT 1", Some(&mut row)).await;
            out.push(reply.map(|r| (r, row_values(&row).map(|v| v.map(<[u8]>::to_vec)).collect())));
        }
        out
    })
}

#[test]
fn a_scripts_text_query_keeps_its_first_row_and_a_hostile_reply_ends_the_connection() {
    let mut set = packet(1, &[2]);
    set.extend(packet(2, b"\x03def\x00\x00\x00\x01a\x00"));
    set.extend(packet(3, b"\x03def\x00\x00\x00\x01b\x00"));
    set.extend(packet(4, b"\x0242\xfb"));
    set.extend(packet(5, b"\x0243\x01x"));
    set.extend(packet(6, &[0xFE, 0, 0, 2, 0, 0, 0]));
    let ok = packet(1, &[0, 1, 0, 2, 0, 0, 0]);
    let got = text_queries(&peer(vec![set, ok]), 2);
    assert_eq!(
        got[0],
        Ok((
            Reply {
                affected: 0,
                rows: 2
            },
            vec![Some(b"42".to_vec()), None]
        ))
    );
    // An OK packet has no row: the kept row is empty.
    assert_eq!(
        got[1],
        Ok((
            Reply {
                affected: 1,
                rows: 0
            },
            vec![]
        ))
    );
    // A reply announcing more than a script's 16 MiB, in packets of
    // 16 MiB - 1 each, is too large before it is read; one cut short is
    // lost; either way the next exchange finds the connection gone.
    let mut huge = packet(1, &[1]);
    huge.extend([0xFF, 0xFF, 0xFF, 2]);
    for (reply, first) in [(huge, MyError::TooLarge), (set_cut(), MyError::Lost)] {
        assert_eq!(
            text_queries(&peer(vec![reply]), 2)
                .into_iter()
                .map(|r| r.err())
                .collect::<Vec<_>>(),
            vec![Some(first), Some(MyError::Lost)]
        );
    }
}

/// A result set cut after its column count (the peer then closes).
fn set_cut() -> Vec<u8> {
    packet(1, &[1])
}

#[test]
fn hostile_replies_end_the_connection_not_the_process() {
    // A header announcing 16 MB (or an HTTP reply, read as 5.5 MB) is too
    // large, and ends the connection as a cut packet does: the next
    // exchange finds it lost.
    for (garbage, first) in [
        (vec![0xFF, 0xFF, 0xFF, 1, 0, 0], MyError::TooLarge),
        (packet(1, &[0x00, 0x01])[..5].to_vec(), MyError::Lost),
        (
            b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec(),
            MyError::TooLarge,
        ),
    ] {
        for held in [false, true] {
            let results = exchange(&peer(vec![garbage.clone()]), false, held);
            assert_eq!(
                results,
                vec![Err(first), Err(MyError::Lost)],
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

/// A server out of step with its client: an OK packet sent unasked after
/// the reply (in the same write), a reply whose packet is out of
/// sequence, or a stale packet of an earlier exchange arriving before the
/// next one's reply. Never read as the next exchange's answer: the
/// connection is lost, on a held socket too.
#[test]
fn a_packet_sent_unasked_or_out_of_sequence_answers_no_later_exchange() {
    let ok = |affected: u8| packet(1, &[0, affected, 0, 2, 0, 0, 0]);
    let answered = Ok(Reply {
        affected: 1,
        rows: 0,
    });
    let mut unasked = ok(1);
    unasked.extend(ok(7));
    let out_of_sequence = packet(2, &[0, 1, 0, 2, 0, 0, 0]);
    for held in [false, true] {
        assert_eq!(
            exchange(&peer(vec![unasked.clone(), ok(2)]), false, held),
            vec![answered, Err(MyError::Lost)],
            "unasked, held {held}"
        );
        assert_eq!(
            exchange(&peer(vec![out_of_sequence.clone(), ok(2)]), false, held),
            vec![Err(MyError::Lost), Err(MyError::Lost)],
            "out of sequence, held {held}"
        );
        let stale = scripted(move |stream| {
            let mut buf = [0u8; 4096];
            if stream.read(&mut buf).unwrap_or(0) == 0 || stream.write_all(&ok(1)).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
            let _ = stream.write_all(&packet(2, &[0, 7, 0, 2, 0, 0, 0]));
            if stream.read(&mut buf).unwrap_or(0) > 0 {
                let _ = stream.write_all(&ok(2));
            }
        });
        assert_eq!(
            exchange(&stale, false, held),
            vec![answered, Err(MyError::Lost)],
            "stale, held {held}"
        );
    }
}

// The text protocol (`text`): result sets, errors and bounds.

use super::text::{decode, Fault, QueryError, QueryResult, Row, MAX_RESULT};

/// A column definition named `name`: catalog, schema, table, original
/// table, name, original name, then the fixed fields (character set,
/// length, type, flags, decimals).
fn column(name: &str) -> Vec<u8> {
    let mut p = Vec::new();
    for part in ["def", "perflab", "t", "t", name, name] {
        p.push(part.len() as u8);
        p.extend_from_slice(part.as_bytes());
    }
    p.extend_from_slice(&[0x0c, 45, 0, 20, 0, 0, 0, 8, 0, 0, 0, 0, 0]);
    p
}

/// A text row: each value a length-encoded string, or 0xFB for NULL.
fn text_row(values: &[Option<&str>]) -> Vec<u8> {
    let mut p = Vec::new();
    for value in values {
        match value {
            None => p.push(0xFB),
            Some(v) if v.len() < 251 => {
                p.push(v.len() as u8);
                p.extend_from_slice(v.as_bytes());
            }
            Some(v) => {
                p.push(0xFC);
                p.extend_from_slice(&(v.len() as u16).to_le_bytes());
                p.extend_from_slice(v.as_bytes());
            }
        }
    }
    p
}

/// A whole result set as a server that did (`deprecate_eof`) or did not
/// agree to CLIENT_DEPRECATE_EOF sends it.
fn result_set(deprecate_eof: bool, names: &[&str], rows: &[Vec<Option<&str>>]) -> Vec<u8> {
    // Sequence ids count modulo 256, as the protocol's do.
    let mut seq: u8 = 1;
    let mut next = |payload: &[u8]| {
        seq = seq.wrapping_add(1);
        packet(seq.wrapping_sub(1), payload)
    };
    let mut out = next(&[names.len() as u8]);
    for name in names {
        out.extend(next(&column(name)));
    }
    if !deprecate_eof {
        out.extend(next(&[0xFE, 0, 0, 2, 0]));
    }
    for row in rows {
        out.extend(next(&text_row(row)));
    }
    if deprecate_eof {
        out.extend(next(&[0xFE, 0, 0, 2, 0, 0, 0]));
    } else {
        out.extend(next(&[0xFE, 0, 0, 2, 0]));
    }
    out
}

#[test]
fn a_result_set_is_read_with_and_without_eof_packets_nulls_included() {
    let long = "x".repeat(300);
    let rows = vec![
        vec![Some("7"), Some("Sleep"), None],
        vec![Some("8"), Some(long.as_str()), Some("LOCK WAIT")],
        vec![Some(""), None, None],
    ];
    for deprecate_eof in [true, false] {
        let set = result_set(deprecate_eof, &["ID", "COMMAND", "trx_state"], &rows);
        let got = decode(&set, deprecate_eof, MAX_RESULT).unwrap().unwrap();
        assert_eq!(got.columns, ["ID", "COMMAND", "trx_state"]);
        assert_eq!(
            got.rows,
            [Row::of(&rows[0]), Row::of(&rows[1]), Row::of(&rows[2])]
        );
        assert_eq!(got.rows[0].get::<u64>(0), Some(7));
        assert_eq!(got.rows[0].text(2), None);
        assert_eq!(got.rows[2].get::<u64>(0), None);
        assert_eq!(got.rows[1].text(1), Some(long.as_str()));
        // Cut anywhere, it is not whole yet.
        for cut in 0..set.len() {
            assert_eq!(
                decode(&set[..cut], deprecate_eof, MAX_RESULT),
                Ok(None),
                "cut at {cut}"
            );
        }
    }
    // No rows at all.
    let empty = result_set(true, &["x"], &[]);
    let got = decode(&empty, true, MAX_RESULT).unwrap().unwrap();
    assert_eq!((got.columns.len(), got.rows.len()), (1, 0));
}

#[test]
fn an_ok_packet_gives_the_rows_changed_and_an_err_packet_its_code_state_and_message() {
    let ok = packet(1, &[0x00, 0xFC, 0xD0, 0x07, 0x00, 0x02, 0x00, 0x00, 0x00]);
    assert_eq!(
        decode(&ok, true, MAX_RESULT),
        Ok(Some(QueryResult {
            affected: 2000,
            ..QueryResult::default()
        }))
    );
    let err = packet(1, b"\xff\x7a\x04#42S02Table 'perflab.x' doesn't exist");
    let fault = Fault::Server {
        code: 1146,
        sqlstate: "42S02".to_string(),
        message: "Table 'perflab.x' doesn't exist".to_string(),
    };
    assert_eq!(decode(&err, true, MAX_RESULT), Err(fault));
    // Without a SQLSTATE marker, the general one.
    let bare = packet(1, b"\xff\x15\x04Access denied");
    assert!(matches!(
        decode(&bare, true, MAX_RESULT),
        Err(Fault::Server { code: 1045, ref sqlstate, ref message })
            if sqlstate == "HY000" && message == "Access denied"
    ));
    // An error after some rows (a statement killed mid-way) ends the reply.
    let mut killed = result_set(true, &["x"], &[vec![Some("1")]]);
    let end = killed.len() - 11;
    killed.truncate(end);
    killed.extend(packet(
        4,
        b"\xff\x16\x07#70100Query execution was interrupted",
    ));
    assert!(matches!(
        decode(&killed, true, MAX_RESULT),
        Err(Fault::Server { code: 1814, .. })
    ));
    // The message Display is the server's own shape.
    let e = QueryError::Server {
        code: 1146,
        sqlstate: "42S02".to_string(),
        message: "Table 'perflab.x' doesn't exist".to_string(),
    };
    assert_eq!(
        e.to_string(),
        "ERROR 1146 (42S02): Table 'perflab.x' doesn't exist"
    );
}

#[test]
fn truncated_and_garbage_packets_are_nonsense_never_a_panic() {
    let with_row = |row: Vec<u8>| {
        let mut set = packet(1, &[2]);
        set.extend(packet(2, &column("a")));
        set.extend(packet(3, &column("b")));
        set.extend(packet(4, &row));
        set.extend(packet(5, &[0xFE, 0, 0, 2, 0, 0, 0]));
        set
    };
    for bad in [
        // A value claiming more bytes than its packet holds.
        with_row(vec![1, b'1', 9, b'a']),
        // One value where two are declared; bytes after the last value.
        with_row(vec![1, b'1']),
        with_row(vec![1, b'1', 0xFB, b'z']),
        // A length cut short.
        with_row(vec![0xFD, 1]),
        // An OK packet cut short, a column definition cut short, an EOF
        // first, an infile request, an empty packet.
        packet(1, &[0]),
        [packet(1, &[1]), packet(2, b"\x03def\x07perf")].concat(),
        packet(1, &[0xFE, 0, 0, 2, 0]),
        packet(1, &[0xFB, b'x']),
        packet(1, &[]),
    ] {
        assert_eq!(
            decode(&bad, true, MAX_RESULT),
            Err(Fault::Nonsense),
            "{bad:?}"
        );
    }
    // Without DEPRECATE_EOF, a row where the EOF after the definitions
    // belongs.
    let mut set = packet(1, &[1]);
    set.extend(packet(2, &column("a")));
    set.extend(packet(3, &text_row(&[Some("1")])));
    assert_eq!(decode(&set, false, MAX_RESULT), Err(Fault::Nonsense));
    // Any byte of a good result set changed to anything: an answer or an
    // error, never a panic.
    let good = result_set(
        false,
        &["a", "b"],
        &[vec![Some("1"), None], vec![Some("22"), Some("x")]],
    );
    for at in 0..good.len() {
        for byte in [0x00, 0x01, 0xFB, 0xFC, 0xFE, 0xFF] {
            let mut bent = good.clone();
            bent[at] = byte;
            let _ = decode(&bent, false, MAX_RESULT);
            let _ = decode(&bent, true, MAX_RESULT);
        }
    }
}

#[test]
fn a_result_over_the_limit_is_one_error_before_it_is_kept() {
    // A header announcing 16 MiB: refused from the header alone.
    let huge = [0xFF, 0xFF, 0xFF, 1, 0x00];
    assert_eq!(decode(&huge, true, MAX_RESULT), Err(Fault::TooLarge));
    let mut big = packet(1, &[1]);
    big.extend_from_slice(&[0xFF, 0xFF, 0x7F, 2]);
    assert_eq!(decode(&big, true, 1 << 20), Err(Fault::TooLarge));
    // Many small rows: their own size counts, not their bytes alone.
    let rows: Vec<Vec<Option<&str>>> = (0..1000).map(|_| vec![None]).collect();
    let set = result_set(true, &["x"], &rows);
    assert!(set.len() < 8 * 1024);
    assert_eq!(decode(&set, true, 16 * 1024), Err(Fault::TooLarge));
    assert_eq!(
        decode(&set, true, MAX_RESULT).unwrap().unwrap().rows.len(),
        1000
    );
}

/// A server on loopback that greets, accepts any login, then answers
/// each query with the next of `replies` (an empty one: no answer, the
/// connection held open until the client leaves), then closes.
fn text_peer(replies: Vec<Vec<u8>>) -> MyTarget {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else {
            return;
        };
        let mut buf = [0u8; 4096];
        if stream
            .write_all(&greeting("mysql_native_password"))
            .is_err()
            || stream.read(&mut buf).unwrap_or(0) == 0
            || stream
                .write_all(&packet(2, &[0, 0, 0, 2, 0, 0, 0]))
                .is_err()
        {
            return;
        }
        for answer in &replies {
            if stream.read(&mut buf).unwrap_or(0) == 0 {
                return;
            }
            if answer.is_empty() {
                while stream.read(&mut buf).unwrap_or(0) > 0 {}
                return;
            }
            if stream.write_all(answer).is_err() {
                return;
            }
        }
    });
    super::super::resolve(&format!("mysql://u:pw@127.0.0.1:{port}/db"), &|_| None).unwrap()
}

/// The results of `queries` on one connection to `target`, each allowed
/// `timeout`, as text.
fn queries(target: &MyTarget, timeout: Duration, count: usize) -> Vec<Result<QueryResult, String>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut wire = super::super::connect(target, timeout).await.unwrap();
        let mut out = Vec::new();
        for _ in 0..count {
            out.push(wire.query("SELECT 1").await.map_err(|e| e.to_string()));
        }
        out
    })
}

#[test]
fn queries_on_a_live_connection_end_in_one_line_when_the_peer_fails() {
    let set = result_set(true, &["1"], &[vec![Some("1")]]);
    let err = packet(1, b"\xff\x7a\x04#42S02no such table");
    let cut = set[..set.len() - 3].to_vec();
    let results = queries(&text_peer(vec![set, err, cut]), Duration::from_secs(10), 4);
    assert_eq!(results[0].as_ref().unwrap().rows, [Row::of(&[Some("1")])]);
    assert_eq!(
        results[1].as_ref().unwrap_err(),
        "ERROR 1146 (42S02): no such table"
    );
    let lost = results[2].as_ref().unwrap_err();
    assert!(
        lost.contains("was lost") && lost.contains("u@127.0.0.1"),
        "{lost}"
    );
    assert!(
        results[3].as_ref().unwrap_err().contains("cut short"),
        "{results:?}"
    );
    // Over the limit: refused from the header, the connection dropped.
    let huge = vec![0xFF, 0xFF, 0xFF, 1, 0x00];
    let results = queries(&text_peer(vec![huge]), Duration::from_secs(10), 2);
    let e = results[0].as_ref().unwrap_err();
    assert!(e.contains("over 16 MiB") && !e.contains('\n'), "{e}");
    assert!(results[1].as_ref().unwrap_err().contains("cut short"));
    // Garbage.
    let garbage = packet(1, b"HTTP/1.1 400 Bad Request");
    let results = queries(&text_peer(vec![garbage]), Duration::from_secs(10), 1);
    assert!(
        results[0].as_ref().unwrap_err().contains("out of protocol"),
        "{results:?}"
    );
}

/// A text reply whose packets come out of sequence, or with bytes after
/// it that no query asked for (an OK sent unasked), is not taken as any
/// query's answer: the connection is lost, and the next query says so
/// rather than reading the stray bytes as its reply.
#[test]
fn a_text_reply_out_of_sequence_or_followed_by_bytes_unasked_loses_the_connection() {
    let set = result_set(true, &["1"], &[vec![Some("1")]]);
    let mut skipped = set.clone();
    // The column count's packet numbered 2: a packet of the reply missed.
    skipped[3] = 2;
    let results = queries(&text_peer(vec![skipped]), Duration::from_secs(10), 2);
    let e = results[0].as_ref().unwrap_err();
    assert!(e.contains("out of sequence") && !e.contains('\n'), "{e}");
    assert!(results[1].as_ref().unwrap_err().contains("cut short"));
    let mut trailed = set.clone();
    trailed.extend(packet(1, &[0, 7, 0, 2, 0, 0, 0]));
    let results = queries(&text_peer(vec![trailed, set]), Duration::from_secs(10), 2);
    let e = results[0].as_ref().unwrap_err();
    assert!(e.contains("no query asked for"), "{e}");
    assert!(
        results[1].as_ref().unwrap_err().contains("cut short"),
        "{results:?}"
    );
    // In sequence and alone, the same reply is a result.
    let set = result_set(true, &["1"], &[vec![Some("1")]]);
    let results = queries(&text_peer(vec![set]), Duration::from_secs(10), 1);
    assert_eq!(results[0].as_ref().unwrap().rows, [Row::of(&[Some("1")])]);
}

#[test]
fn a_query_without_an_answer_ends_at_its_deadline() {
    let results = queries(&text_peer(vec![Vec::new()]), Duration::from_millis(200), 2);
    let e = results[0].as_ref().unwrap_err();
    assert!(e.contains("did not answer a query within"), "{e}");
    assert!(results[1].as_ref().unwrap_err().contains("cut short"));
}

mod props {
    //! Replies as a server might send them, whole, cut or absurd: the
    //! scanner, the result decoder and the greeting's reader give a value
    //! or an error, never a panic.
    use super::*;
    use proptest::prelude::*;

    /// A length-encoded integer: small, wide, or near `u64::MAX`.
    fn lenenc_bytes() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            (0u8..=0xFA).prop_map(|n| vec![n]),
            any::<u16>().prop_map(|n| [&[0xFC][..], &n.to_le_bytes()].concat()),
            (0u64..64).prop_map(|n| [&[0xFE][..], &(u64::MAX - n).to_le_bytes()].concat()),
            any::<u64>().prop_map(|n| [&[0xFE][..], &n.to_le_bytes()].concat()),
            Just(vec![0xFE]),
            Just(vec![0xFB]),
        ]
    }

    /// A payload that starts like a reply's packets do.
    fn payload() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            (lenenc_bytes(), prop::collection::vec(any::<u8>(), 0..16))
                .prop_map(|(head, rest)| [head, rest].concat()),
            prop::collection::vec(any::<u8>(), 0..32),
            Just(vec![0xFE, 0, 0, 2, 0]),
            Just(b"\xff\xbd\x04#40001Deadlock".to_vec()),
        ]
    }

    /// Packets with their headers, some lying about their length, cut
    /// anywhere.
    fn reply() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec((payload(), any::<bool>(), any::<u32>()), 0..8),
            any::<prop::sample::Index>(),
        )
            .prop_map(|(packets, cut)| {
                let mut out = Vec::new();
                for (i, (payload, lie, len)) in packets.iter().enumerate() {
                    let mut one = packet(i as u8, payload);
                    if *lie {
                        one[..3].copy_from_slice(&len.to_le_bytes()[..3]);
                    }
                    out.extend_from_slice(&one);
                }
                let keep = cut.index(out.len() + 1);
                out.truncate(keep);
                out
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn replies_never_panic(bytes in reply(), deprecate_eof in any::<bool>()) {
            if let Ok(Some((end, _))) = scan(&bytes, deprecate_eof, MAX_REPLY) {
                prop_assert!(end <= bytes.len());
            }
            let _ = text::decode(&bytes, deprecate_eof, 1 << 16);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = scan(&bytes, false, MAX_REPLY);
            let _ = text::decode(&bytes, true, 1 << 16);
            let _ = Greeting::parse(&bytes);
        }
    }
}
