//! `perflab kube`: check the run, make the token and the generators'
//! certificate, write the manifests (mode 0600), say how to apply them.

use super::Exit;
use crate::cli::{plan_from, Cli, Command, KubeArgs};
use crate::error::PlanError;
use crate::kube::KubeSpec;
use crate::wire::tls::Identity;
use clap::Parser;

/// Runs `perflab kube`.
pub fn kube(args: &KubeArgs) -> anyhow::Result<Exit> {
    let spec = KubeSpec {
        name: args.name.clone(),
        namespace: args.namespace.clone(),
        image: args.image.clone(),
        generators: args.generators,
        idle_exit: args.generator_idle,
        wait: std::time::Duration::from_secs(600),
        run: args.run.clone(),
    };
    spec.check(|run| {
        let argv = std::iter::once("perflab".to_string()).chain(run.iter().cloned());
        let cli = Cli::try_parse_from(argv).map_err(|e| {
            PlanError::new(format!(
                "the run after --: {}",
                crate::util::one_line(&e.to_string())
            ))
        })?;
        match &cli.command {
            // Every run kube writes is offered by generators.
            Command::Run(run) => plan_from(run)
                .and_then(|(_, plan)| crate::cli::runs_on_generators(&plan, "perflab kube")),
            _ => Err(PlanError::new(
                "after -- comes the run, as perflab takes it: -- run WORKLOAD FLAGS…",
            )),
        }
    })?;
    let service = format!("{}-generators", spec.name);
    let names = vec![
        service.clone(),
        format!("*.{service}"),
        format!("*.{service}.{}.svc", spec.namespace),
    ];
    let identity = Identity::self_signed(names)?;
    let token = random_token()?;
    let text = spec.manifests(&token, &identity);
    write_private(&args.out, text.as_bytes())?;
    crate::util::out(format_args!(
        "wrote {}: a Secret (token, certificate {}), the headless Service {service}, the Indexed Job {service} of {} generators, the claim {}-results and the Job {}-coordinator\napply it with: kubectl apply -f {}\nfollow the run with: kubectl logs -n {} -f job/{}-coordinator\n",
        args.out.display(),
        identity.fingerprint(),
        spec.generators,
        spec.name,
        spec.name,
        args.out.display(),
        spec.namespace,
        spec.name
    ));
    Ok(Exit::Ok)
}

/// 32 bytes from the kernel's random source, as hex.
fn random_token() -> anyhow::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| PlanError::new(format!("cannot read /dev/urandom for a token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes a file only its owner can read, made new (an existing file is
/// replaced whole).
fn write_private(path: &std::path::Path, bytes: &[u8]) -> Result<(), PlanError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |e: std::io::Error| {
        PlanError::flag(
            "--out",
            format!("cannot write {}: {e}", path.display()),
            "give a file in a directory you can write",
        )
    };
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(failed)?;
    file.write_all(bytes).map_err(failed)
}
