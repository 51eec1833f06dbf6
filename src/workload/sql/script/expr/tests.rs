use super::*;
use crate::workload::sql::script::vars::Slots;
use rand::SeedableRng;

fn eval_with(text: &str, set: &[(&str, &str)]) -> Result<Val, EvalError> {
    let mut slots = Slots::default();
    let expr = parse(text, &mut slots).unwrap();
    let mut vars = Vars::new(&slots);
    for (name, value) in set {
        let slot = slots.slot(name).unwrap();
        vars.grow(&slots);
        vars.set_text(slot, value);
    }
    vars.grow(&slots);
    let mut rng = SmallRng::seed_from_u64(1);
    let mut env = Env {
        vars: &vars,
        rng: &mut rng,
        default_seed: 0,
    };
    expr.eval(&mut env)
}

fn eval(text: &str) -> Result<Val, EvalError> {
    eval_with(text, &[])
}

#[test]
fn arithmetic_follows_the_precedence_and_types_of_the_language() {
    for (text, want) in [
        ("1 + 2 * 3", Val::Int(7)),
        ("(1 + 2) * 3", Val::Int(9)),
        ("7 / 2", Val::Int(3)),
        ("-7 / 2", Val::Int(-3)),
        ("7 % 3", Val::Int(1)),
        ("7.0 / 2", Val::Double(3.5)),
        ("1 << 4 | 1", Val::Int(17)),
        ("6 & 3", Val::Int(2)),
        ("6 # 3", Val::Int(5)),
        ("~0", Val::Int(-1)),
        ("2 < 3 AND NOT 3 <= 2", Val::Bool(true)),
        ("1 = 1 OR 1 / 0 = 1", Val::Bool(true)),
        ("NULL IS NULL", Val::Bool(true)),
        ("1 + NULL", Val::Null),
        (
            "CASE WHEN 1 > 2 THEN 10 WHEN 2 > 1 THEN 20 ELSE 30 END",
            Val::Int(20),
        ),
        (
            "abs(-5) + greatest(1, 9, 3) - least(4, 2.5)",
            Val::Double(11.5),
        ),
        ("int(3.9) + mod(-7, 3)", Val::Int(2)),
        ("-9223372036854775808", Val::Int(i64::MIN)),
    ] {
        assert_eq!(eval(text), Ok(want), "{text}");
    }
}

#[test]
fn overflow_division_by_zero_and_unset_variables_are_errors_not_panics() {
    for (text, want) in [
        ("9223372036854775807 + 1", EvalError::OutOfRange),
        ("-9223372036854775808 / -1", EvalError::OutOfRange),
        ("abs(-9223372036854775808)", EvalError::OutOfRange),
        ("1 / 0", EvalError::DivisionByZero),
        ("1 % 0", EvalError::DivisionByZero),
        ("1 << 64", EvalError::OutOfRange),
        ("int(1e300)", EvalError::OutOfRange),
        (":never + 1", EvalError::Unset),
        ("random(5, 1)", EvalError::BadArgument),
    ] {
        assert_eq!(eval(text), Err(want), "{text}");
    }
    assert_eq!(eval("-9223372036854775808 % -1"), Ok(Val::Int(0)));
}

#[test]
fn a_variables_text_is_read_as_the_number_it_holds() {
    assert_eq!(eval_with(":a * 2", &[("a", "21")]), Ok(Val::Int(42)));
    assert_eq!(eval_with(":a * 2", &[("a", "1.5")]), Ok(Val::Double(3.0)));
    assert_eq!(
        eval_with(":a * 2", &[("a", "abc")]),
        Err(EvalError::NotANumber)
    );
}

#[test]
fn malformed_expressions_say_what_is_wrong() {
    for (text, needle) in [
        ("1 +", "ends where a value"),
        ("random(1)", "takes 2 arguments"),
        ("nosuch(1)", "no function"),
        ("(1 + 2", "`)` expected"),
        ("1 2", "unexpected `2`"),
        ("1 $ 2", "`$`"),
        ("99999999999999999999", "out of bigint"),
        ("random_gaussian(1, 10, 1.0)", "2.0"),
        ("random_zipfian(1, 10, 0.5)", "1.001"),
        ("CASE 1 END", "WHEN"),
    ] {
        let err = parse(text, &mut Slots::default()).unwrap_err();
        assert!(err.contains(needle), "{text}: {err}");
    }
    let deep = format!("{}1{}", "(".repeat(500), ")".repeat(500));
    assert!(parse(&deep, &mut Slots::default())
        .unwrap_err()
        .contains("nests"));
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Any text parses or is refused, and whatever parses evaluates
        /// to a value or an error: never a panic.
        #[test]
        fn any_text_parses_or_is_refused_and_never_panics(text in "[-+*/%()<>=!&|#~, 0-9.eE:a-z_]{0,40}") {
            let mut slots = Slots::default();
            if let Ok(expr) = parse(&text, &mut slots) {
                let vars = Vars::new(&slots);
                let mut rng = SmallRng::seed_from_u64(3);
                let mut env = Env { vars: &vars, rng: &mut rng, default_seed: 5 };
                let _ = expr.eval(&mut env);
            }
        }

        #[test]
        fn any_integers_combine_without_a_panic(a in any::<i64>(), b in any::<i64>(), op in 0usize..12) {
            let ops = ["+", "-", "*", "/", "%", "<<", ">>", "&", "|", "#", "<", "="];
            let text = format!("{a} {} {b}", ops[op]);
            let _ = eval(&text);
            let _ = eval(&format!("random({a}, {b})"));
        }
    }
}
