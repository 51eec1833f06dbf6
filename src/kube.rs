//! `perflab kube`: the Kubernetes manifests of one run on many
//! generators. What it writes (one file of YAML documents, which `kubectl
//! apply -f` takes; strings YAML would misread are quoted, see
//! [`crate::util::yaml`]):
//! - a Secret: the agents' token (32 random bytes, hex) and a certificate
//!   and key made now, shared by every generator and pinned by the
//!   coordinator through its SHA-256 fingerprint;
//! - a headless Service, so that pod K of the generators' Job is
//!   reachable as `NAME-generators-K.NAME-generators` (an Indexed Job's
//!   pod is named by its index, and the Service is its subdomain);
//! - an Indexed Job of N generators (`completionMode: Indexed`,
//!   `parallelism: N`), each `perflab agent --generate` in TLS with the
//!   token, leaving once idle so the Job completes;
//! - a claim for the results' volume;
//! - the coordinator's Job: `perflab run …` on those N generators, waiting
//!   until each answers, its store on the volume, then the run's JSON
//!   export printed to its log.
//!
//! The run's own flags are checked as `perflab run` checks them before
//! anything is written; the flags this command sets itself are refused.
//! No secret of the run is put in a command, where `kubectl get job -o
//! yaml` and every reader of the Job would see it: a target holding a
//! password and each secret header go into the Secret, and reach the
//! coordinator as environment variables (`secretKeyRef`) that it reads
//! (`--target env:VAR`, `--header-env VAR`); any other flag holding a
//! secret is refused.

use crate::error::PlanError;
use crate::wire::tls::Identity;
use serde_json::{json, Value};
use std::time::Duration;

/// The port every generator listens on.
pub(crate) const PORT: u16 = 7071;

/// Where the Secret is mounted, and the results' volume.
pub(crate) const SECRET_DIR: &str = "/etc/perflab";
pub(crate) const RESULTS_DIR: &str = "/results";

/// The most generators one manifest names.
pub(crate) const MAX_GENERATORS: u32 = 1000;

/// What the manifests are made of.
#[derive(Debug, Clone)]
pub(crate) struct KubeSpec {
    /// The objects' prefix (a DNS label).
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) image: String,
    pub(crate) generators: u32,
    /// A generator leaves after this long without a request.
    pub(crate) idle_exit: Duration,
    /// How long the coordinator waits for the generators to answer.
    pub(crate) wait: Duration,
    /// `run WORKLOAD …`, as `perflab run` takes it.
    pub(crate) run: Vec<String>,
}

/// A secret of the run's flags, moved into the Secret and given to the
/// coordinator as an environment variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MovedSecret {
    /// Its key in the Secret.
    pub(crate) key: String,
    /// The coordinator's environment variable that holds it.
    pub(crate) var: String,
    /// The secret text.
    pub(crate) value: String,
}

/// The flags `perflab kube` gives the run itself.
const SET_HERE: &[&str] = &[
    "--generators",
    "--generators-file",
    "--generators-wait",
    "--token-file",
    "--agent-fingerprint",
    "--agent-cacert",
    "--store",
];

impl KubeSpec {
    /// Checks the names, the count and the run's flags (the run's flags
    /// by `check_run`, which parses them as `perflab run` does).
    pub(crate) fn check(
        &self,
        check_run: impl Fn(&[String]) -> Result<(), PlanError>,
    ) -> Result<(), PlanError> {
        for (flag, value) in [("--name", &self.name), ("--namespace", &self.namespace)] {
            let fits = !value.is_empty()
                && value.len() <= 40
                && value
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !value.starts_with('-')
                && !value.ends_with('-');
            if !fits {
                return Err(PlanError::flag(
                    flag,
                    format!("'{value}' is not a DNS label of at most 40 characters"),
                    "use lower-case letters, digits and '-', e.g. perflab",
                ));
            }
        }
        if self.image.is_empty() || self.image.chars().any(char::is_whitespace) {
            return Err(PlanError::flag(
                "--image",
                format!("'{}' is not an image", self.image),
                "give the image built from the Containerfile, e.g. registry.example/perflab:0.1.0",
            ));
        }
        // The manifest gives whole seconds: a shorter wait would be
        // written as another than the one asked for.
        if self.idle_exit.is_zero() || self.idle_exit.subsec_nanos() != 0 {
            return Err(PlanError::flag(
                "--generator-idle",
                format!(
                    "{} is not a whole number of seconds of at least 1 s",
                    crate::units::format_duration(self.idle_exit)
                ),
                "give whole seconds, e.g. 30s or 10m (the default)",
            ));
        }
        if !(1..=MAX_GENERATORS).contains(&self.generators) {
            return Err(PlanError::flag(
                "--generators",
                format!("{} generators", self.generators),
                "give 1 to 1000",
            ));
        }
        if self.run.first().map(String::as_str) != Some("run") {
            return Err(PlanError::new(
                "after -- comes the run, as perflab takes it: -- run WORKLOAD FLAGS…",
            ));
        }
        if let Some(flag) = self.run.iter().find(|a| {
            SET_HERE
                .iter()
                .any(|s| *a == s || a.starts_with(&format!("{s}=")))
        }) {
            return Err(PlanError::new(format!(
                "{flag} is set by perflab kube; drop it from the run's flags"
            )));
        }
        check_run(&self.run)
    }

    /// The run's words with every secret replaced by the environment
    /// variable that will hold it, and the secrets so moved: a target
    /// holding a password (`--target env:PERFLAB_TARGET`), each secret
    /// header (`--header-env PERFLAB_HEADER_N`). A word holding another
    /// secret (a probe's password) is refused: it would be in the Job.
    pub(crate) fn split_secrets(&self) -> Result<(Vec<String>, Vec<MovedSecret>), PlanError> {
        let mut words = Vec::with_capacity(self.run.len());
        let mut moved = Vec::new();
        let mut given = self.run.iter();
        while let Some(word) = given.next() {
            // `--flag VALUE` or `--flag=VALUE`.
            let (flag, value) = match word.split_once('=') {
                Some((flag, value)) if flag == "--target" || flag == "--header" => {
                    (flag, Some(value.to_string()))
                }
                _ if word == "--target" || word == "--header" => {
                    (word.as_str(), given.next().cloned())
                }
                _ => {
                    if crate::secret::redact(word) != *word {
                        return Err(PlanError::new(format!(
                            "the run's '{}' holds a secret, which perflab kube would put in the coordinator Job's command; give a password in --target and a secret in --header, which it moves into the Secret",
                            crate::secret::redact(word)
                        )));
                    }
                    words.push(word.clone());
                    continue;
                }
            };
            let Some(value) = value else {
                words.push(word.clone());
                continue;
            };
            let secret = if flag == "--target" {
                crate::secret::redact(&value) != value
            } else {
                crate::secret::redact_header(&value) != value
            };
            if !secret {
                words.extend([flag.to_string(), value]);
                continue;
            }
            if flag == "--target" {
                let var = "PERFLAB_TARGET".to_string();
                words.extend([flag.to_string(), format!("env:{var}")]);
                moved.push(MovedSecret {
                    key: "target".to_string(),
                    var,
                    value,
                });
            } else {
                let n = moved
                    .iter()
                    .filter(|m| m.key.starts_with("header-"))
                    .count();
                let var = format!("PERFLAB_HEADER_{n}");
                words.extend(["--header-env".to_string(), var.clone()]);
                moved.push(MovedSecret {
                    key: format!("header-{n}"),
                    var,
                    value,
                });
            }
        }
        Ok((words, moved))
    }

    /// The generators' addresses, as the coordinator reaches them.
    pub(crate) fn generator_addresses(&self) -> Vec<String> {
        let service = format!("{}-generators", self.name);
        (0..self.generators)
            .map(|k| format!("agent://{service}-{k}.{service}:{PORT}"))
            .collect()
    }

    /// The generators' command.
    pub(crate) fn generator_command(&self) -> Vec<String> {
        [
            "perflab",
            "agent",
            "--listen",
            &format!("0.0.0.0:{PORT}"),
            "--token-file",
            &format!("{SECRET_DIR}/token"),
            "--tls-cert",
            &format!("{SECRET_DIR}/tls.crt"),
            "--tls-key",
            &format!("{SECRET_DIR}/tls.key"),
            "--generate",
            "--idle-exit",
            &format!("{}s", self.idle_exit.as_secs()),
        ]
        .iter()
        .map(ToString::to_string)
        .collect()
    }

    /// The coordinator's shell line: the run (`words`, its secrets moved
    /// out by [`KubeSpec::split_secrets`]), then its export.
    pub(crate) fn coordinator_script(&self, words: &[String], fingerprint: &str) -> String {
        let mut run: Vec<String> = vec!["perflab".to_string()];
        run.extend(words.iter().cloned());
        run.extend([
            "--generators".to_string(),
            self.generator_addresses().join(","),
            "--generators-wait".to_string(),
            format!("{}s", self.wait.as_secs().max(1)),
            "--token-file".to_string(),
            format!("{SECRET_DIR}/token"),
            "--agent-fingerprint".to_string(),
            fingerprint.to_string(),
            "--store".to_string(),
            format!("{RESULTS_DIR}/perflab.db"),
        ]);
        let run: Vec<String> = run.iter().map(|a| quoted(a)).collect();
        format!(
            "{}; code=$?; perflab show last --store {RESULTS_DIR}/perflab.db --json -; exit $code",
            run.join(" ")
        )
    }

    /// Every manifest, as one file's text; refused when the run holds a
    /// secret that cannot be moved into the Secret.
    pub(crate) fn manifests(&self, token: &str, identity: &Identity) -> Result<String, PlanError> {
        let (words, moved) = self.split_secrets()?;
        let docs: Vec<Value> = vec![
            self.secret(token, identity, &moved),
            self.service(),
            self.generators_job(),
            self.results_claim(),
            self.coordinator_job(&words, &moved, &identity.fingerprint()),
        ];
        Ok(crate::util::yaml::documents(&docs))
    }

    /// The labels of this run's objects of role `role`.
    fn labels(&self, role: &str) -> Value {
        json!({ "app.kubernetes.io/name": "perflab", "perflab.dev/run": self.name, "perflab.dev/role": role })
    }

    /// An object's metadata: its name, the namespace, its labels.
    fn meta(&self, name: String, role: &str) -> Value {
        json!({ "name": name, "namespace": self.namespace, "labels": self.labels(role) })
    }

    fn secret_name(&self) -> String {
        format!("{}-secret", self.name)
    }

    /// The generators' Service and Job (and so their pods' subdomain).
    fn service_name(&self) -> String {
        format!("{}-generators", self.name)
    }

    fn results_name(&self) -> String {
        format!("{}-results", self.name)
    }

    /// The Secret: the token, the certificate and key, and the run's
    /// secrets moved out of its flags.
    fn secret(&self, token: &str, identity: &Identity, moved: &[MovedSecret]) -> Value {
        let (cert, key) = identity.pem();
        let mut data = serde_json::Map::new();
        data.insert("token".into(), token.into());
        data.insert("tls.crt".into(), cert.into());
        data.insert("tls.key".into(), key.into());
        for m in moved {
            data.insert(m.key.clone(), m.value.clone().into());
        }
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": self.meta(self.secret_name(), "secret"),
            "type": "Opaque",
            "stringData": data,
        })
    }

    /// The headless Service that names each generator's pod.
    fn service(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": self.meta(self.service_name(), "generator"),
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": true,
                "selector": { "perflab.dev/run": self.name, "perflab.dev/role": "generator" },
                "ports": [{ "name": "agent", "port": PORT, "targetPort": PORT }],
            },
        })
    }

    /// The Secret mounted read-only where the agents look for it.
    fn secret_mount() -> Value {
        json!({ "name": "secret", "mountPath": SECRET_DIR, "readOnly": true })
    }

    /// The generators' Indexed Job.
    fn generators_job(&self) -> Value {
        // The generators see the token and their certificate, not the
        // run's secrets (those they need cross to them in TLS).
        let volume = json!({ "name": "secret", "secret": {
            "secretName": self.secret_name(),
            "defaultMode": 0o400,
            "items": [
                { "key": "token", "path": "token" },
                { "key": "tls.crt", "path": "tls.crt" },
                { "key": "tls.key", "path": "tls.key" },
            ],
        } });
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": self.meta(self.service_name(), "generator"),
            "spec": {
                "completionMode": "Indexed",
                "completions": self.generators,
                "parallelism": self.generators,
                "backoffLimit": 0,
                "template": {
                    "metadata": { "labels": self.labels("generator") },
                    "spec": {
                        "subdomain": self.service_name(),
                        "restartPolicy": "Never",
                        "containers": [{
                            "name": "generator",
                            "image": self.image,
                            "command": self.generator_command(),
                            "ports": [{ "name": "agent", "containerPort": PORT }],
                            "readinessProbe": { "tcpSocket": { "port": PORT }, "periodSeconds": 2 },
                            "volumeMounts": [Self::secret_mount()],
                        }],
                        "volumes": [volume],
                    },
                },
            },
        })
    }

    /// The claim for the results' volume.
    fn results_claim(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": self.meta(self.results_name(), "results"),
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": { "requests": { "storage": "1Gi" } },
            },
        })
    }

    /// The coordinator's Job: the run (`words`) on the generators, its
    /// store on the results' volume.
    fn coordinator_job(&self, words: &[String], moved: &[MovedSecret], fingerprint: &str) -> Value {
        // The coordinator reads the token from a file; the run's secrets
        // reach it as environment variables.
        let volume = json!({ "name": "secret", "secret": {
            "secretName": self.secret_name(),
            "defaultMode": 0o400,
            "items": [{ "key": "token", "path": "token" }],
        } });
        let env: Vec<Value> = moved
            .iter()
            .map(|m| json!({ "name": m.var, "valueFrom": { "secretKeyRef": { "name": self.secret_name(), "key": m.key } } }))
            .collect();
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": self.meta(format!("{}-coordinator", self.name), "coordinator"),
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": { "labels": self.labels("coordinator") },
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{
                            "name": "coordinator",
                            "image": self.image,
                            "command": ["sh", "-c", self.coordinator_script(words, fingerprint)],
                            "env": env,
                            "volumeMounts": [
                                Self::secret_mount(),
                                { "name": "results", "mountPath": RESULTS_DIR },
                            ],
                        }],
                        "volumes": [
                            volume,
                            { "name": "results", "persistentVolumeClaim": { "claimName": self.results_name() } },
                        ],
                    },
                },
            },
        })
    }
}

/// A word for `sh`: as it is when plain, else in single quotes.
fn quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:,=@%+".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(run: &[&str]) -> KubeSpec {
        KubeSpec {
            name: "perflab".to_string(),
            namespace: "lab".to_string(),
            image: "registry.example/perflab:0.1.0".to_string(),
            generators: 3,
            idle_exit: Duration::from_secs(600),
            wait: Duration::from_secs(600),
            run: run.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn words_are_quoted_for_the_shell() {
        assert_eq!(quoted("--users"), "--users");
        assert_eq!(quoted("10..1000/10"), "10..1000/10");
        assert_eq!(quoted("p95<50ms"), "'p95<50ms'");
        assert_eq!(quoted("it's"), r"'it'\''s'");
        assert_eq!(quoted(""), "''");
    }

    /// A generator's idle wait is written in whole seconds: 0 s or a
    /// fraction is refused, never silently made another.
    #[test]
    fn a_generator_idle_of_no_whole_second_is_refused() {
        let ok = |_: &[String]| Ok(());
        for idle in [Duration::ZERO, Duration::from_millis(1500)] {
            let mut s = spec(&["run", "null"]);
            s.idle_exit = idle;
            let e = s.check(ok).unwrap_err().to_string();
            assert!(e.starts_with("--generator-idle: "), "{e}");
            assert!(e.contains("whole seconds"), "{e}");
        }
    }

    #[test]
    fn the_run_is_checked_and_what_kube_sets_is_refused() {
        let ok = |_: &[String]| Ok(());
        assert!(spec(&["run", "null"]).check(ok).is_ok());
        for (run, says) in [
            (&["show", "1"][..], "after -- comes the run"),
            (
                &["run", "null", "--store", "x.db"][..],
                "--store is set by perflab kube",
            ),
            (
                &["run", "null", "--token-file=t"][..],
                "--token-file=t is set by perflab kube",
            ),
        ] {
            let e = spec(run).check(ok).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        let mut bad = spec(&["run", "null"]);
        bad.name = "Perf_Lab".to_string();
        assert!(bad.check(ok).unwrap_err().to_string().starts_with("--name"));
        bad = spec(&["run", "null"]);
        bad.generators = 0;
        assert!(bad
            .check(ok)
            .unwrap_err()
            .to_string()
            .starts_with("--generators"));
    }

    /// A password in the target and a secret header leave the command
    /// for the Secret; a header holding none stays; a probe's password,
    /// which has no way into the Secret, is refused.
    #[test]
    fn the_run_s_secrets_move_into_the_secret_and_out_of_the_command() {
        let s = spec(&[
            "run",
            "bank",
            "--target",
            "postgres://bob:SECRETPW@db/shop",
            "--header=Authorization: Bearer SECRETPW",
            "--header",
            "Accept: text/html",
            "--header",
            "X-Api-Token: SECRETPW",
        ]);
        let (words, moved) = s.split_secrets().unwrap();
        let line = s.coordinator_script(&words, "AB:CD");
        assert!(!line.contains("SECRETPW"), "{line}");
        assert!(line.contains("--target env:PERFLAB_TARGET"), "{line}");
        assert!(line.contains("--header-env PERFLAB_HEADER_0"), "{line}");
        assert!(line.contains("--header-env PERFLAB_HEADER_1"), "{line}");
        assert!(line.contains("--header 'Accept: text/html'"), "{line}");
        let keys: Vec<(&str, &str)> = moved
            .iter()
            .map(|m| (m.key.as_str(), m.var.as_str()))
            .collect();
        assert_eq!(
            keys,
            [
                ("target", "PERFLAB_TARGET"),
                ("header-0", "PERFLAB_HEADER_0"),
                ("header-1", "PERFLAB_HEADER_1")
            ]
        );
        assert_eq!(moved[0].value, "postgres://bob:SECRETPW@db/shop");
        assert_eq!(moved[2].value, "X-Api-Token: SECRETPW");

        let identity = Identity::self_signed(vec!["perflab-generators".to_string()]).unwrap();
        let text = s.manifests("TOKEN", &identity).unwrap();
        let jobs: Vec<&str> = text
            .split("---\n")
            .filter(|d| d.contains("\nkind: Job\n"))
            .collect();
        assert_eq!(jobs.len(), 2);
        for job in jobs {
            assert!(!job.contains("SECRETPW"), "{job}");
        }
        assert!(text.contains("secretKeyRef:"), "{text}");

        let probe = spec(&[
            "run",
            "null",
            "--probe",
            "node-exporter://u:SECRETPW@h:9100",
        ]);
        let e = probe.split_secrets().unwrap_err().to_string();
        assert!(
            e.contains("holds a secret") && !e.contains("SECRETPW"),
            "{e}"
        );
    }

    #[test]
    fn the_coordinator_names_every_generator_by_its_pod() {
        let s = spec(&["run", "web", "--slo", "p95<50ms"]);
        let script = s.coordinator_script(&s.run, "AB:CD");
        assert!(script.contains(
            "--generators agent://perflab-generators-0.perflab-generators:7071,agent://perflab-generators-1.perflab-generators:7071,agent://perflab-generators-2.perflab-generators:7071"
        ), "{script}");
        assert!(script.contains("'p95<50ms'"), "{script}");
        assert!(script.ends_with("--json -; exit $code"), "{script}");
    }
}
