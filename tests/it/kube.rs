//! `perflab kube`: the manifests validate offline against the
//! Kubernetes API's schemas (kubernetes-validate, strict), and the pods
//! they describe work: the generator Job's exact command runs as a local
//! process in a network namespace of its own per generator, the
//! coordinator Job's exact shell line runs with the generators' pod names
//! mapped to those namespaces' addresses by a hosts file (bind-mounted in
//! a mount namespace of its own), and the run completes on both, its
//! export in the coordinator's output; the generators then leave when
//! idle, as their Job's pods must to complete.

use crate::support::{contains, perflab_expect, tempdir, Island};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The validator `scripts/test.sh` installs.
fn validator() -> PathBuf {
    if let Ok(path) = std::env::var("PERFLAB_KUBE_VALIDATE") {
        return PathBuf::from(path);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/tools/kube-validate/bin/kubernetes-validate");
    assert!(
        venv.exists(),
        "kubernetes-validate is missing: run scripts/test.sh, which installs it"
    );
    venv
}

/// Whether the manifests in `file` pass strict validation for 1.32.
fn validates(file: &Path) -> (bool, String) {
    let out = Command::new(validator())
        .args(["--strict", "-k", "1.32.0"])
        .arg(file)
        .output()
        .expect("kubernetes-validate runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The manifests' documents, read as YAML (PyYAML: a YAML 1.1 reader,
/// as strict about plain words as the go-yaml kubectl uses); each is a
/// mapping, and the file holds no JSON.
fn documents(text: &str) -> Vec<serde_json::Value> {
    use std::io::Write;
    assert!(
        !text.contains("\n{"),
        "the manifests are JSON, not YAML:\n{text}"
    );
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import sys, json, yaml; json.dump(list(yaml.safe_load_all(sys.stdin)), sys.stdout)",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs (with PyYAML)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "PyYAML refused the manifests:\n{text}"
    );
    let docs: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(docs.iter().all(serde_json::Value::is_object), "{text}");
    docs
}

fn kind<'a>(docs: &'a [serde_json::Value], kind: &str, name: &str) -> &'a serde_json::Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn the_manifests_validate_and_their_pods_run_a_sweep_on_two_generators() {
    let dir = tempdir();
    let out = dir.path().join("perflab.yaml");
    let (said, _) = perflab_expect(
        dir.path(),
        &format!(
            "kube --generators 2 --image registry.example/perflab:0.1.0 --namespace lab --name plk --generator-idle 5s --out {} -- run null --service 1ms --users 2,4 --warmup 0s --duration 2s",
            out.display()
        ),
        0,
    );
    contains(&said, "kubectl apply -f");
    let text = std::fs::read_to_string(&out).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let docs = documents(&text);
    assert_eq!(docs.len(), 5);
    let (ok, why) = validates(&out);
    assert!(ok, "{why}");
    // The validator is no formality: a misspelt field fails it.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, text.replace("completionMode:", "completionModes:")).unwrap();
    assert!(!validates(&bad).0, "a misspelt field passed");

    let token = kind(&docs, "Secret", "plk-secret")["stringData"]["token"]
        .as_str()
        .unwrap();
    assert!(!said.contains(token), "the token was printed");
    let job = kind(&docs, "Job", "plk-generators");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    assert_eq!(job["spec"]["parallelism"], 2);
    assert_eq!(
        job["spec"]["template"]["spec"]["subdomain"],
        "plk-generators"
    );
    let service = kind(&docs, "Service", "plk-generators");
    assert_eq!(service["spec"]["clusterIP"], "None");

    // The Secret as the pods mount it.
    let secret_dir = dir.path().join("secret");
    std::fs::create_dir(&secret_dir).unwrap();
    for (file, value) in kind(&docs, "Secret", "plk-secret")["stringData"]
        .as_object()
        .unwrap()
    {
        std::fs::write(secret_dir.join(file), value.as_str().unwrap()).unwrap();
    }
    let results = dir.path().join("results");
    std::fs::create_dir(&results).unwrap();
    let perflab = assert_cmd::cargo::cargo_bin("perflab");
    let local = |word: &str| {
        word.replace("/etc/perflab", secret_dir.to_str().unwrap())
            .replace("/results", results.to_str().unwrap())
    };

    // Each generator pod: the Job's command, in a namespace of its own.
    let command: Vec<String> = job["spec"]["template"]["spec"]["containers"][0]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| local(w.as_str().unwrap()))
        .collect();
    assert_eq!(command[0], "perflab");
    let islands = [Island::create(), Island::create()];
    let mut generators = Vec::new();
    for island in &islands {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &island.name])
            .arg(&perflab)
            .args(&command[1..])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().and_then(|l| l.ok()).unwrap_or_default();
        assert!(
            first.contains("listening on https://0.0.0.0:7071"),
            "{first}"
        );
        generators.push((child, lines));
    }

    // The coordinator pod: its shell line, the pods' names in a hosts file.
    let hosts = dir.path().join("hosts");
    std::fs::write(
        &hosts,
        format!(
            "127.0.0.1 localhost\n{} plk-generators-0.plk-generators\n{} plk-generators-1.plk-generators\n",
            islands[0].ip, islands[1].ip
        ),
    )
    .unwrap();
    let coordinator = kind(&docs, "Job", "plk-coordinator");
    let line = coordinator["spec"]["template"]["spec"]["containers"][0]["command"][2]
        .as_str()
        .unwrap();
    let bin = perflab.parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            "mount --bind \"$0\" /etc/hosts && exec sh -c \"$1\"",
        ])
        .arg(&hosts)
        .arg(local(line))
        .env("PATH", path)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    contains(
        &stdout,
        "generator agent://plk-generators-1.plk-generators:7071: clock offset",
    );
    let export: serde_json::Value =
        serde_json::from_str(&stdout[stdout.find("\n{").unwrap()..]).unwrap();
    for step in export["steps"].as_array().unwrap() {
        assert_eq!(step["generators"].as_array().unwrap().len(), 2, "{step}");
    }
    assert!(results.join("perflab.db").exists());

    // Idle, each generator leaves with status 0: its Job can complete.
    let deadline = Instant::now() + Duration::from_secs(60);
    for (mut child, _) in generators {
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("a generator did not leave when idle");
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(status.success(), "{status}");
    }
}

/// A run the manifests cannot carry is refused before anything is written.
#[test]
fn a_run_kube_cannot_carry_is_one_line() {
    let dir = tempdir();
    for (run, says) in [
        ("run null --store x.db", "--store is set by perflab kube"),
        ("run null --users 0", "--users"),
        ("show 1", "after -- comes the run"),
        // Generators cannot offer a workload that runs in one process.
        (
            "run disk --size 1MiB --target file:x.bin",
            "the disk workload runs in this process only, not on generators",
        ),
        (
            "run bank --target sqlite:x.db",
            "an embedded target (sqlite:)",
        ),
    ] {
        let (_, err) = perflab_expect(
            dir.path(),
            &format!("kube --generators 2 --image i --out m.yaml -- {run}"),
            2,
        );
        contains(&err, says);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    assert!(!dir.path().join("m.yaml").exists());
    assert!(!dir.path().join("x.bin").exists());
    assert!(!dir.path().join("x.db").exists());
}

/// A target's password and a secret header go into the Secret and reach
/// the coordinator from its environment (`secretKeyRef`): no Job holds
/// them, the generators do not mount them, and the manifests validate.
#[test]
fn the_run_s_secrets_are_in_the_secret_and_in_no_job() {
    let dir = tempdir();
    let out = dir.path().join("m.yaml");
    for run in [
        &[
            "run",
            "bank",
            "--target",
            "postgres://bob:SECRETPW@127.0.0.1:1/shop",
        ][..],
        &[
            "run",
            "web",
            "--target",
            "http://127.0.0.1:1/",
            "--header",
            "Authorization: Bearer SECRETPW",
            "--header",
            "Accept: text/html",
        ][..],
    ] {
        let said = crate::support::perflab(dir.path())
            .args(["kube", "--generators", "1", "--image", "i", "--out"])
            .arg(&out)
            .arg("--")
            .args(run)
            .assert()
            .code(0)
            .get_output()
            .clone();
        assert!(!String::from_utf8_lossy(&said.stdout).contains("SECRETPW"));
        let text = std::fs::read_to_string(&out).unwrap();
        let docs = documents(&text);
        let data = &kind(&docs, "Secret", "perflab-secret")["stringData"];
        let coordinator = kind(&docs, "Job", "perflab-coordinator");
        let generators = kind(&docs, "Job", "perflab-generators");
        for job in [coordinator, generators] {
            assert!(!job.to_string().contains("SECRETPW"), "{job}");
        }
        let container = &coordinator["spec"]["template"]["spec"]["containers"][0];
        let env = container["env"].as_array().unwrap();
        assert_eq!(env.len(), 1, "{env:?}");
        let key = env[0]["valueFrom"]["secretKeyRef"]["key"].as_str().unwrap();
        assert!(data[key].as_str().unwrap().contains("SECRETPW"));
        let line = container["command"][2].as_str().unwrap();
        contains(line, env[0]["name"].as_str().unwrap());
        let mounted = &generators["spec"]["template"]["spec"]["volumes"][0]["secret"]["items"];
        assert_eq!(mounted.as_array().unwrap().len(), 3, "{mounted}");
        let (ok, why) = validates(&out);
        assert!(ok, "{why}");
    }
}
