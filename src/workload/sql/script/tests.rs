use super::*;

fn read(text: &str) -> Result<(Script, Slots), String> {
    let mut slots = Slots::default();
    parse("s.sql", text, &mut slots).map(|s| (s, slots))
}

#[test]
fn a_transaction_script_reads_into_sets_and_parameterised_statements() {
    let (script, slots) = read(
        "-- a bank transfer\n\
         \\set aid random(1, 100000 * :scale)\n\
         \\set delta random(-5000, 5000)\n\
         BEGIN;\n\
         UPDATE accounts SET abalance = abalance + :delta\n   WHERE aid = :aid;\n\
         SELECT abalance::text, 'a:b;c' FROM accounts WHERE aid = :aid \\gset acct_\n\
         END;\n",
    )
    .unwrap();
    assert_eq!(script.statements.len(), 4);
    let names = slots.names();
    let update = &script.statements[1];
    assert_eq!(update.line, 5);
    assert_eq!(
        update.render(|n| format!("${n}")),
        "UPDATE accounts SET abalance = abalance + $1\n   WHERE aid = $2"
    );
    assert_eq!(
        update.shown(&names),
        "UPDATE accounts SET abalance = abalance + :delta WHERE aid = :aid"
    );
    let select = &script.statements[2];
    assert_eq!(
        select.render(|_| "?".into()),
        "SELECT abalance::text, 'a:b;c' FROM accounts WHERE aid = ?"
    );
    assert_eq!(select.gset.as_deref(), Some("acct_"));
    assert!(matches!(script.program[0], Step::Set { .. }));
    assert_eq!(script.program.len(), 6);
    assert!(slots.get("scale").is_some());
}

#[test]
fn quotes_dollar_quotes_and_comments_hide_semicolons_and_colons() {
    let (script, _) =
        read("SELECT $$a;b:c$$, \"x;y\", 1 /* ; :no */ ; SELECT $f$ ; $f$;\nSELECT 'it''s; :no';")
            .unwrap();
    let texts: Vec<String> = script
        .statements
        .iter()
        .map(|s| s.render(|_| "?".into()))
        .collect();
    assert_eq!(
        texts,
        [
            "SELECT $$a;b:c$$, \"x;y\", 1",
            "SELECT $f$ ; $f$",
            "SELECT 'it''s; :no'"
        ]
    );
    assert!(script.statements.iter().all(|s| s.params.is_empty()));
}

#[test]
fn if_chains_become_jumps_that_skip_the_branches_not_taken() {
    let (script, _) = read(
        "\\set x 2\n\\if :x = 1\nSELECT 1;\n\\elif :x = 2\nSELECT 2;\n\\else\nSELECT 3;\n\\endif\nSELECT 4;\n",
    )
    .unwrap();
    // 0 set, 1 unless x=1 → 4, 2 sql1, 3 jump → 8, 4 unless x=2 → 7,
    // 5 sql2, 6 jump → 8, 7 sql3, 8 sql4.
    let jumps: Vec<(usize, usize)> = script
        .program
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            Step::Jump { to } | Step::JumpUnless { to, .. } => Some((i, *to)),
            _ => None,
        })
        .collect();
    assert_eq!(jumps, [(1, 4), (3, 8), (4, 7), (6, 8)]);
}

#[test]
fn what_perflab_does_not_run_is_refused_with_the_file_and_line() {
    for (text, needle) in [
        (
            "SELECT 1;\n\\shell rm -rf /\n",
            "s.sql:2: perflab runs no shell command",
        ),
        (
            "\\setshell x echo 1\nSELECT 1;",
            "s.sql:1: perflab runs no shell",
        ),
        ("\\nosuch\nSELECT 1;", "s.sql:1: unknown command \\nosuch"),
        ("\\set x random(1,\nSELECT 1;", "s.sql:1: "),
        ("\\set 1x 5\nSELECT 1;", "no variable name"),
        ("\\if 1\nSELECT 1;\n", "s.sql:1: \\if without \\endif"),
        ("\\else\nSELECT 1;", "\\else without \\if"),
        ("\\if 1\n\\else\n\\else\n\\endif\nSELECT 1;", "after \\else"),
        ("\\startpipeline\nSELECT 1;", "pipelines"),
        ("SELECT 1 \\; SELECT 2;", "s.sql:1: \\;"),
        ("\\set x 1\n", "holds no SQL command"),
        ("SELECT 'open;\n", "s.sql:1: a quote"),
        ("\\sleep 10 hours\nSELECT 1;", "us, ms or s"),
        ("\\sleep -1\nSELECT 1;", "no whole number"),
        ("SELECT 1 \\gset a b", "one prefix"),
    ] {
        let err = read(text).unwrap_err();
        assert!(err.contains(needle), "{text:?}: {err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }
}

#[test]
fn a_backslash_line_continues_on_the_next() {
    let (script, _) = read("\\set x 1 + \\\n 2\nSELECT :x;").unwrap();
    assert!(
        matches!(&script.program[0], Step::Set { expr, .. } if *expr != expr::Expr::Const(expr::Val::Int(1)))
    );
    assert_eq!(script.statements.len(), 1);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Any text is a script or one line saying why not: never a panic.
        #[test]
        fn any_text_is_a_script_or_one_line(text in "[\\\\a-z :;'\"$*/()=0-9\\n-]{0,80}") {
            match read(&text) {
                Ok((script, _)) => prop_assert!(!script.statements.is_empty()),
                Err(e) => prop_assert!(!e.contains('\n'), "{}", e),
            }
        }
    }
}

#[test]
fn an_init_file_is_split_into_its_statements_as_written() {
    let text = "CREATE TABLE t (a int, b text); -- a comment\nINSERT INTO t VALUES (1, 'x;y'),\n  (2, ':not_a_var');\n/* gone */ SELECT a FROM t WHERE b = :kept\n";
    let got = super::plain_statements(text).unwrap();
    assert_eq!(
        got,
        vec![
            (1, "CREATE TABLE t (a int, b text)".to_string()),
            (
                2,
                "INSERT INTO t VALUES (1, 'x;y'),\n  (2, ':not_a_var')".to_string()
            ),
            (4, "SELECT a FROM t WHERE b = :kept".to_string()),
        ]
    );
    let e = super::plain_statements("SELECT 1;\nSELECT 'open;\n").unwrap_err();
    assert!(e.contains(":2:") && e.contains("never closes"), "{e}");
}
