//! `perflab kube`: check the run, make the token and the generators'
//! certificate, write the manifests (mode 0600, or standard output for
//! `--out -`), say how to apply them.

use super::output::{save, Readers, Saved};
use super::Exit;
use crate::cli::{plan_from, Cli, Command, KubeArgs};
use crate::error::PlanError;
use crate::kube::KubeSpec;
use crate::wire::tls::Identity;
use clap::Parser;

/// Runs `perflab kube`.
pub(crate) fn kube(args: &KubeArgs) -> anyhow::Result<Exit> {
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
    let text = spec.manifests(&token, &identity)?;
    let saved = save(&args.out, &text, "--out", Readers::Owner)?;
    let (wrote, file) = match saved {
        Saved::File => (
            args.out.display().to_string(),
            args.out.display().to_string(),
        ),
        Saved::Stdout => (
            "the manifests to standard output".to_string(),
            "-".to_string(),
        ),
    };
    // With the manifests on standard output, the rest goes to standard
    // error: `perflab kube … --out - | kubectl apply -f -` works.
    let say = |text: std::fmt::Arguments<'_>| match saved {
        Saved::File => crate::util::out(text),
        Saved::Stdout => crate::util::err(text),
    };
    say(format_args!(
        "wrote {wrote}: a Secret (token, certificate {}, and the run's secrets), the headless Service {service}, the Indexed Job {service} of {} generators, the claim {}-results and the Job {}-coordinator\napply it with: kubectl apply -f {file}\nfollow the run with: kubectl logs -n {} -f job/{}-coordinator\n",
        identity.fingerprint(),
        spec.generators,
        spec.name,
        spec.name,
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
