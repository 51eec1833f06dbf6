//! Qdiscs read over netlink from a server's own network namespace: the test
//! makes two throwaway namespaces joined by two veth pairs, shapes one link
//! with `tbf rate 2mbit` and the other with `netem loss 3% delay 10ms`,
//! starts a stand-in "server" process inside the first, sends bounded UDP
//! traffic across both links, and reads the qdiscs through perflab's
//! reader. Everything it made is removed by a Drop guard, even on failure.
//!
//! A kernel built without sch_netem (CONFIG_NET_SCH_NETEM unset, as on this
//! lab's VMs) refuses the netem qdisc: the test then says so on stderr and
//! checks the tbf alone; netem's parsing is covered by src/probe/qdisc.rs's
//! tests on bytes laid out as the kernel's headers define them.
//!
//! With `PERFLAB_CAPTURE_NETLINK=DIR` it also writes the raw link and qdisc
//! dumps of the namespace to DIR (how tests/fixtures/netlink/ was made).

use perflab::probe::counters::QdiscSample;
use perflab::probe::netlink::RouteSocket;
use perflab::probe::qdisc::{QdiscCounters, QdiscReader};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Two namespaces and a process parked in the first; removed on drop.
struct Lab {
    server_ns: String,
    peer_ns: String,
    server: Option<Child>,
    /// Whether the kernel took the netem qdisc.
    netem: bool,
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut child) = self.server.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        for ns in [&self.server_ns, &self.peer_ns] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn run(cmd: &str) {
    let mut parts = cmd.split_whitespace();
    let program = parts.next().unwrap();
    let status = Command::new(program)
        .args(parts)
        .status()
        .unwrap_or_else(|e| panic!("{cmd}: {e} (the test needs iproute2's ip and tc)"));
    assert!(status.success(), "{cmd}: {status}");
}

impl Lab {
    fn create() -> Lab {
        assert_eq!(
            // SAFETY: geteuid has no preconditions.
            unsafe { libc::geteuid() },
            0,
            "this test makes network namespaces: run it as root"
        );
        let id = std::process::id();
        let mut lab = Lab {
            server_ns: format!("perflab-probe-test-{id}"),
            peer_ns: format!("perflab-probe-peer-{id}"),
            server: None,
            netem: false,
        };
        let (s, p) = (lab.server_ns.clone(), lab.peer_ns.clone());
        run(&format!("ip netns add {s}"));
        run(&format!("ip netns add {p}"));
        for (here, there, net) in [("pl-a", "pl-b", 0), ("pl-c", "pl-d", 1)] {
            run(&format!(
                "ip -n {s} link add {here} type veth peer name {there} netns {p}"
            ));
            run(&format!("ip -n {s} addr add 10.231.{net}.1/24 dev {here}"));
            run(&format!("ip -n {p} addr add 10.231.{net}.2/24 dev {there}"));
            run(&format!("ip -n {s} link set {here} up"));
            run(&format!("ip -n {p} link set {there} up"));
        }
        run(&format!(
            "tc -n {s} qdisc add dev pl-a root tbf rate 2mbit burst 32kbit latency 400ms"
        ));
        let netem = Command::new("tc")
            .args(["-n", &s, "qdisc", "add", "dev", "pl-c", "root", "netem"])
            .args(["loss", "3%", "delay", "10ms"])
            .output()
            .expect("tc runs");
        lab.netem = netem.status.success();
        if !lab.netem {
            let why = String::from_utf8_lossy(&netem.stderr);
            assert!(
                why.contains("unknown"),
                "tc qdisc add … netem failed: {why}"
            );
            eprintln!(
                "this kernel has no netem qdisc ({}): checking tbf only",
                why.trim()
            );
        }
        lab.server = Some(
            Command::new("ip")
                .args(["netns", "exec", &s, "sleep", "120"])
                .stdin(Stdio::null())
                .spawn()
                .expect("a process in the namespace"),
        );
        lab
    }

    fn server_pid(&self) -> u32 {
        self.server.as_ref().map(Child::id).unwrap()
    }

    /// Sends `n` 1000-byte datagrams across each link, from a thread that
    /// entered the server's namespace (it ends afterwards).
    fn send_across(&self, n: usize) {
        let ns = std::fs::File::open(format!("/var/run/netns/{}", self.server_ns)).unwrap();
        std::thread::spawn(move || {
            // SAFETY: setns on an open namespace file moves only this thread.
            assert_eq!(
                unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) },
                0
            );
            let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
            let payload = [7u8; 1000];
            for _ in 0..n {
                for to in ["10.231.0.2:9", "10.231.1.2:9"] {
                    let _ = socket.send_to(&payload, to);
                }
            }
        })
        .join()
        .unwrap();
        // The tbf lets its 4 KiB burst through and the rest out at 250 kB/s:
        // wait for the queue to drain (20 kB in 80 ms, ARP first).
        std::thread::sleep(Duration::from_millis(400));
    }
}

fn find<'a>(qdiscs: &'a [QdiscCounters], kind: &str) -> &'a QdiscCounters {
    qdiscs
        .iter()
        .find(|q| q.kind == kind && q.namespace == "server")
        .unwrap_or_else(|| panic!("no {kind} in the server's namespace: {qdiscs:#?}"))
}

#[test]
fn the_servers_namespace_shows_its_tbf_rate_and_netem_loss() {
    let lab = Lab::create();
    // Give the process time to enter the namespace (ip execs sleep there).
    let own = std::fs::metadata("/proc/self/ns/net").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::metadata(format!("/proc/{}/ns/net", lab.server_pid()))
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .ok()
        == Some(std::os::unix::fs::MetadataExt::ino(&own))
    {
        assert!(
            Instant::now() < deadline,
            "the process never entered the namespace"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    lab.send_across(20);

    let mut reader = QdiscReader::new();
    let proc = Path::new("/proc");
    let started = Instant::now();
    let before = reader.read(proc, Some(lab.server_pid()));
    let first = started.elapsed();
    assert_eq!(reader.last_error, None);
    let tbf = find(&before, "tbf");
    assert_eq!(tbf.interface, "pl-a");
    assert_eq!(tbf.rate_bytes_per_s, Some(250_000.0), "2 Mbit/s");
    assert!(tbf.packets > 0 && tbf.bytes > 0, "{before:#?}");
    if lab.netem {
        let netem = find(&before, "netem");
        assert_eq!(netem.interface, "pl-c");
        assert!((netem.loss.unwrap() - 0.03).abs() < 1e-6, "{netem:?}");
        assert!((netem.delay_s.unwrap() - 0.010).abs() < 1e-9, "{netem:?}");
        assert!(netem.packets > 0, "{before:#?}");
    } else {
        // pl-c keeps a veth's default, noqueue, which is left out.
        assert!(before.iter().all(|q| q.interface != "pl-c"), "{before:#?}");
    }
    // The server's veths are not the host's.
    assert!(before
        .iter()
        .filter(|q| q.namespace == "host")
        .all(|q| !q.interface.starts_with("pl-")));
    assert!(before.iter().all(|q| q.kind != "noqueue"));

    // A second reading reuses the namespace's socket: it costs a dump, not a thread.
    lab.send_across(20);
    let started = Instant::now();
    let after = reader.read(proc, Some(lab.server_pid()));
    let second = started.elapsed();
    eprintln!(
        "qdisc reading, host and server namespaces: first {first:?} (entering the namespace), then {second:?}"
    );
    let samples = QdiscSample::all_between(&before, &after, 1.0);
    let shaped = samples
        .iter()
        .find(|s| s.kind == "tbf" && s.namespace == "server")
        .unwrap();
    assert!(shaped.bytes_per_s >= 20_000.0, "{shaped:?}");
    assert!(
        shaped.overlimits > 0,
        "a 20 kB burst over a 4 kB bucket: {shaped:?}"
    );
    assert_eq!(shaped.rate_bytes_per_s, Some(250_000.0));

    // Link names are kept between readings: a link made since is named all
    // the same (its unknown index makes the reader dump the links again).
    let s = &lab.server_ns;
    run(&format!("ip -n {s} link add pl-e type veth peer name pl-f"));
    run(&format!(
        "tc -n {s} qdisc add dev pl-e root tbf rate 1mbit burst 32kbit latency 400ms"
    ));
    let later = reader.read(proc, Some(lab.server_pid()));
    let added = later
        .iter()
        .find(|q| {
            q.kind == "tbf" && q.namespace == "server" && q.rate_bytes_per_s == Some(125_000.0)
        })
        .unwrap_or_else(|| panic!("no 1mbit tbf: {later:#?}"));
    assert_eq!(added.interface, "pl-e");

    if let Some(dir) = std::env::var_os("PERFLAB_CAPTURE_NETLINK") {
        let ns = format!("/var/run/netns/{}", lab.server_ns);
        let mut socket = RouteSocket::open_in_namespace(Path::new(&ns)).unwrap();
        let links = socket.dump(libc::RTM_GETLINK, &[0u8; 16]).unwrap();
        let qdiscs = socket.dump(libc::RTM_GETQDISC, &[0u8; 20]).unwrap();
        let dir = Path::new(&dir);
        std::fs::write(dir.join("links.bin"), links).unwrap();
        std::fs::write(dir.join("qdiscs.bin"), qdiscs).unwrap();
    }
}

/// A process in this namespace has no "server" qdiscs, and a vanished pid
/// is no error: the host's qdiscs are still read.
#[test]
fn a_server_in_the_hosts_namespace_adds_nothing() {
    let mut reader = QdiscReader::new();
    let mine = reader.read(Path::new("/proc"), Some(std::process::id()));
    assert!(mine.iter().all(|q| q.namespace == "host"), "{mine:?}");
    assert_eq!(reader.last_error, None);
    let gone = reader.read(Path::new("/proc"), Some(u32::MAX - 1));
    assert!(gone.iter().all(|q| q.namespace == "host"));
}
