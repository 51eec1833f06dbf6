use super::*;
use crate::analyze::gate::GateLine;
use crate::analyze::gate::VerdictSide;

fn line(threshold: &str, failed: bool, said: &str) -> GateLine {
    GateLine {
        threshold: threshold.to_string(),
        failed,
        at: Some("8 users".to_string()),
        change: Some(-0.12),
        interval: Some((-0.14, -0.10)),
        significant: true,
        said: said.to_string(),
    }
}

fn a_gate() -> Gate {
    Gate {
        base: "base <1> & \"old\".json".to_string(),
        new: "run 2".to_string(),
        lines: vec![
            line(
                "throughput<-5%",
                true,
                "FAIL throughput<-5%: -12.0% at 8 users & more",
            ),
            line(
                "p95>+10%",
                false,
                "pass p95>+10%: +1.0% at 8 users: within +10.0%",
            ),
            line("p99>+20%", true, "FAIL p99>+20%: +30% \u{1b}[2J 'quoted'"),
        ],
        failed: true,
        moved: Some("the bottleneck moved from cpu to software contention (row locks)".to_string()),
        verdicts: Some((
            VerdictSide {
                bottleneck: "cpu".to_string(),
                peak: Some("2100 tps at 8 users".to_string()),
                p95: Some("5.20ms".to_string()),
                evidence: Some("cpu 99.0% busy at 8 users".to_string()),
            },
            VerdictSide {
                bottleneck: "software contention (row locks)".to_string(),
                peak: Some("1700 tps at 4 users".to_string()),
                p95: None,
                evidence: Some("sessions waiting on a lock | 61%".to_string()),
            },
        )),
    }
}

/// The JUnit XML is parsed by Python's XML parser (a parser other than
/// the writer): well formed, one suite, one case per threshold, a
/// `<failure>` in each failed one, the counts in the attributes, and
/// every text read back as it was written.
#[test]
fn the_junit_xml_is_well_formed_and_counts_its_cases_and_failures() {
    let xml = junit(&a_gate());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gate.xml");
    std::fs::write(&file, &xml).unwrap();
    let script = r#"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "testsuites", root.tag
suites = root.findall("testsuite")
assert len(suites) == 1
s = suites[0]
cases = s.findall("testcase")
fails = [c for c in cases if c.find("failure") is not None]
assert s.get("tests") == str(len(cases)) == root.get("tests") == "3", s.attrib
assert s.get("failures") == str(len(fails)) == root.get("failures") == "2", s.attrib
assert s.get("name") == 'perflab gate: run 2 against base <1> & "old".json', s.get("name")
assert [c.get("name") for c in cases] == ["throughput<-5%", "p95>+10%", "p99>+20%"]
assert [c.get("name") for c in fails] == ["throughput<-5%", "p99>+20%"]
f = fails[0].find("failure")
assert f.get("message") == f.text == "FAIL throughput<-5%: -12.0% at 8 users & more", f.attrib
assert "'quoted'" in fails[1].find("failure").text
assert "row locks" in s.find("system-out").text
print("ok", len(cases), len(fails))
"#;
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&file)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}\n{xml}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok 3 2");
    // The escape character cannot be in XML 1.0 at all.
    assert!(!xml.contains('\u{1b}'), "{xml}");
}

#[test]
fn the_markdown_summary_is_a_table_of_one_row_per_threshold() {
    let md = markdown(&a_gate());
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| `")).collect();
    assert_eq!(rows.len(), 3, "{md}");
    assert!(
        rows[0].starts_with("| `throughput<-5%` | **FAIL** |"),
        "{md}"
    );
    assert!(rows[1].starts_with("| `p95>+10%` | pass |"), "{md}");
    assert!(
        md.contains("| threshold | result | line |\n|---|---|---|"),
        "{md}"
    );
    assert!(
        md.contains("the bottleneck moved from cpu to software contention (row locks)\n"),
        "{md}"
    );
    // The two verdicts side by side: a row per field, the baseline first;
    // what one verdict lacks is a dash, a `|` in a cell escaped.
    assert!(
        md.contains("| verdict | base <1> & \"old\".json (baseline) | run 2 |\n|---|---|---|\n"),
        "{md}"
    );
    assert!(
        md.contains("| bottleneck | cpu | software contention (row locks) |\n"),
        "{md}"
    );
    assert!(md.contains("| p95 at the peak | 5.20ms | - |\n"), "{md}");
    assert!(
        md.ends_with(
            "| evidence | cpu 99.0% busy at 8 users | sessions waiting on a lock \\| 61% |\n"
        ),
        "{md}"
    );
    let text = terminal(&a_gate());
    assert!(
        text.contains("    run 2: software contention (row locks), peak 1700 tps at 4 users; sessions waiting"),
        "{text}"
    );
}
