//! Remote probes in a run: a perflab agent and a real node_exporter on
//! loopback sampled at every interval and stored with the steps; an agent
//! that stops mid-run leaves a recorded gap and one warning; probes that are
//! misspelt or not answering stop the run before it starts.

use crate::agent::{free_port, Agent};
use crate::support::{contains, last_export, perflab_expect, perflab_ok, perflab_process, tempdir};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The measured intervals' samples of the first probe, per step.
fn probe_samples(export: &serde_json::Value) -> Vec<Vec<serde_json::Value>> {
    export["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| {
            step["intervals"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["phase"] == "measured")
                .map(|i| i["probes"][0]["sample"].clone())
                .collect()
        })
        .collect()
}

#[test]
fn a_run_stores_the_agents_samples_and_the_gap_when_it_stops() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "probe-t0ken-0123456789\n").unwrap();
    let agent = Agent::start(dir.path(), &token_file);
    let args = format!(
        "run null --users 1,2 --warmup 0s --duration 3s --probe agent://127.0.0.1:{} --token-file {}",
        agent.port,
        token_file.display()
    );
    let child = perflab_process(dir.path())
        .args(args.split_whitespace())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Stop the agent once the first step is stored: the second has a gap.
    let store = dir.path().join("perflab.db");
    let deadline = Instant::now() + Duration::from_secs(60);
    while crate::support::stored_steps(&store) < 1 {
        assert!(Instant::now() < deadline, "the first step was never stored");
        std::thread::sleep(Duration::from_millis(50));
    }
    agent.stop();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        stderr.matches("stopped answering").count(),
        1,
        "said once: {stderr}"
    );
    let export = last_export(dir.path());
    // The agent's host inventory is stored with the run, as server.*.
    assert!(export["run"]["inventory"]["server.kernel"].is_string());
    let steps = probe_samples(&export);
    assert_eq!(steps.len(), 2);
    assert!(steps[0].len() >= 2);
    for sample in &steps[0] {
        assert!(!sample["cpus"].as_array().unwrap().is_empty(), "{sample}");
        assert!(sample["seconds"].as_f64().unwrap() > 0.5);
    }
    assert!(
        steps[1].iter().any(|s| s.is_null()),
        "no gap: {:?}",
        steps[1]
    );
    let shown = perflab_ok(dir.path(), "show last");
    contains(
        &shown,
        &format!("agent://127.0.0.1:{} during each step", agent_port(&args)),
    );
    contains(&shown, "gaps");
}

fn agent_port(args: &str) -> &str {
    let rest = args.split("agent://127.0.0.1:").nth(1).unwrap();
    rest.split_whitespace().next().unwrap()
}

/// Debian's node_exporter on a free loopback port, ended by PID on drop.
struct NodeExporter {
    child: Child,
    port: u16,
}

impl NodeExporter {
    fn start() -> Self {
        let port = free_port();
        let child = std::process::Command::new("prometheus-node-exporter")
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus-node-exporter is installed (scripts/test.sh installs it)");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "node_exporter did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        NodeExporter { child, port }
    }
}

impl Drop for NodeExporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_real_node_exporter_is_sampled_every_interval() {
    let exporter = NodeExporter::start();
    let dir = tempdir();
    let out = perflab_ok(
        dir.path(),
        &format!(
            "run null --users 1 --warmup 0s --duration 3s --probe node-exporter://127.0.0.1:{}",
            exporter.port
        ),
    );
    contains(
        &out,
        &format!(
            "node-exporter://127.0.0.1:{} during each step",
            exporter.port
        ),
    );
    let steps = probe_samples(&last_export(dir.path()));
    assert!(steps[0].len() >= 2);
    for s in &steps[0] {
        // The exporter's clock times the interval: about a second.
        let seconds = s["seconds"].as_f64().unwrap();
        assert!((0.5..2.0).contains(&seconds), "{seconds}");
        let busy = 1.0 - s["cpu"]["idle"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&busy));
        assert!(!s["disks"].as_array().unwrap().is_empty());
        // node_exporter has no per-process CPU.
        assert!(s["processes"].as_array().unwrap().is_empty());
    }
    // The exporter and perflab's own probe watch the same host at the same
    // boundaries: their CPU shares agree.
    let export = last_export(dir.path());
    for step in export["steps"].as_array().unwrap() {
        let measured: Vec<&serde_json::Value> = step["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["phase"] == "measured")
            .collect();
        let mean_idle = |pick: &dyn Fn(&serde_json::Value) -> f64| {
            measured.iter().map(|i| pick(i)).sum::<f64>() / measured.len() as f64
        };
        let local = mean_idle(&|i| i["host"]["cpu"]["idle"].as_f64().unwrap());
        let remote = mean_idle(&|i| i["probes"][0]["sample"]["cpu"]["idle"].as_f64().unwrap());
        assert!(
            (local - remote).abs() < 0.1,
            "idle {local} here vs {remote} from node_exporter"
        );
    }
    let watched = perflab_ok(
        dir.path(),
        &format!(
            "watch --probe node-exporter://127.0.0.1:{} --interval 500ms --duration 1s",
            exporter.port
        ),
    );
    assert_eq!(watched.lines().count(), 2, "{watched}");
    contains(&watched, "cpu U");
}

#[test]
fn probes_that_are_misspelt_or_silent_stop_the_run_before_it_starts() {
    let dir = tempdir();
    let (_, err) = perflab_expect(dir.path(), "run null --probe http://127.0.0.1:9100", 2);
    contains(&err, "--probe: 'http://127.0.0.1:9100' is not a probe");
    let silent = format!("node-exporter://127.0.0.1:{}", free_port());
    let (_, err) = perflab_expect(dir.path(), &format!("run null --probe {silent}"), 2);
    contains(&err, &format!("the probe {silent} does not answer"));
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        !dir.path().join("perflab.db").exists()
            || crate::support::stored_steps(&dir.path().join("perflab.db")) == 0
    );
}
