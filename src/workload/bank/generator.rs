//! The bank on generators: what the coordinator sends ([`Form`]: how to
//! reach the database server it prepared — its address, user, password
//! and database, which cross in TLS and are stored nowhere — and the
//! bank's mix, scale, isolation, retries and pipelining), and the bank a
//! generator attaches to it. A generator neither loads nor checks: the
//! coordinator loaded the bank once before the sweep and checks it once
//! after, with every generator's transactions counted in.

use super::mix::{BankMix, Isolation};
use super::mysql::MyBank;
use super::postgres::PgBank;
use super::BankWorkload;
use crate::error::PlanError;
use crate::sut::mysql::{MyOpts, MyTarget};
use crate::sut::postgres::PgTarget;
use crate::workload::{Started, SweepDriver};
use std::sync::Arc;

/// How a generator reaches the database.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(tag = "server", rename_all = "snake_case")]
pub(super) enum Reach {
    Postgres {
        hosts: Vec<String>,
        ports: Vec<u16>,
        user: Option<String>,
        password: Option<String>,
        dbname: Option<String>,
        options: Option<String>,
        display: String,
    },
    Mysql {
        host: String,
        port: u16,
        user: Option<String>,
        password: Option<String>,
        db: Option<String>,
        display: String,
    },
}

/// What a generator attaches the bank from.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Form {
    reach: Reach,
    mix: BankMix,
    scale: u32,
    isolation: Isolation,
    max_tries: u32,
    pipeline: bool,
}

impl Form {
    /// The form of a bank on PostgreSQL; none when the server is reached
    /// through a Unix socket (no generator elsewhere can).
    pub(super) fn postgres(
        target: &PgTarget,
        mix: BankMix,
        scale: u32,
        isolation: Isolation,
        max_tries: u32,
        pipeline: bool,
    ) -> Option<serde_json::Value> {
        use tokio_postgres::config::Host;
        let config = &target.config;
        let hosts = config
            .get_hosts()
            .iter()
            .map(|h| match h {
                Host::Tcp(name) => Some(name.clone()),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        let reach = Reach::Postgres {
            hosts,
            ports: config.get_ports().to_vec(),
            user: config.get_user().map(ToString::to_string),
            password: config
                .get_password()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
            dbname: config.get_dbname().map(ToString::to_string),
            options: config.get_options().map(ToString::to_string),
            display: target.display.clone(),
        };
        Self::value(reach, mix, scale, isolation, max_tries, pipeline)
    }

    /// The form of a bank on MariaDB or MySQL.
    pub(super) fn mysql(
        target: &MyTarget,
        mix: BankMix,
        scale: u32,
        isolation: Isolation,
        max_tries: u32,
    ) -> Option<serde_json::Value> {
        let opts = &target.opts;
        let reach = Reach::Mysql {
            host: opts.host.clone(),
            port: opts.port,
            user: opts.user.clone(),
            password: opts.password.clone(),
            db: opts.db.clone(),
            display: target.display.clone(),
        };
        Self::value(reach, mix, scale, isolation, max_tries, false)
    }

    fn value(
        reach: Reach,
        mix: BankMix,
        scale: u32,
        isolation: Isolation,
        max_tries: u32,
        pipeline: bool,
    ) -> Option<serde_json::Value> {
        serde_json::to_value(Form {
            reach,
            mix,
            scale,
            isolation,
            max_tries,
            pipeline,
        })
        .ok()
    }
}

/// The form a generator was sent, checked as the bank's flags are: a
/// scale of 1 to [`super::ops::MAX_SCALE`], tries of 1 or more, weights
/// that can be drawn from, a server named.
pub(super) fn read(form: serde_json::Value) -> Result<Form, PlanError> {
    let form: Form = serde_json::from_value(form)
        .map_err(|e| PlanError::new(format!("the bank's form is not one: {e}")))?;
    if !(1..=super::ops::MAX_SCALE).contains(&form.scale) {
        return Err(PlanError::new(format!(
            "form.scale is {}; give 1 to {}",
            form.scale,
            super::ops::MAX_SCALE
        )));
    }
    if form.max_tries == 0 {
        return Err(PlanError::new("form.max_tries is 0; give 1 or more"));
    }
    form.mix
        .check()
        .map_err(|e| PlanError::new(format!("form.mix: {e}")))?;
    let named = match &form.reach {
        Reach::Postgres { hosts, ports, .. } => {
            !hosts.is_empty() && !hosts.iter().any(String::is_empty) && !ports.contains(&0)
        }
        Reach::Mysql { host, port, .. } => !host.is_empty() && *port != 0,
    };
    if !named {
        return Err(PlanError::new(
            "form.reach names no host, or port 0; the coordinator sends the server it prepared",
        ));
    }
    Ok(form)
}

/// Attaches the bank from its form and hands it to `driver`.
pub(super) fn build<D: SweepDriver>(
    form: serde_json::Value,
    driver: D,
) -> anyhow::Result<D::Output> {
    let form = read(form)?;
    match form.reach {
        Reach::Postgres {
            hosts,
            ports,
            user,
            password,
            dbname,
            options,
            display,
        } => {
            let mut config = tokio_postgres::Config::new();
            for host in &hosts {
                config.host(host);
            }
            for port in &ports {
                config.port(*port);
            }
            if let Some(user) = &user {
                config.user(user);
            }
            if let Some(password) = &password {
                config.password(password);
            }
            if let Some(dbname) = &dbname {
                config.dbname(dbname);
            }
            if let Some(options) = &options {
                config.options(options);
            }
            let target = PgTarget { config, display };
            let bank = PgBank::attach(
                target,
                form.mix,
                form.isolation,
                form.max_tries,
                form.pipeline,
            )?;
            let workload = BankWorkload::on_generator(bank, form.mix, form.scale);
            driver.drive(Arc::new(workload), Started::default())
        }
        Reach::Mysql {
            host,
            port,
            user,
            password,
            db,
            display,
        } => {
            let opts = MyOpts {
                host,
                port,
                socket: None,
                user,
                password,
                db,
                tls: false,
            };
            let target = MyTarget { opts, display };
            let bank = MyBank::attach(target, form.mix, form.isolation, form.max_tries)?;
            let workload = BankWorkload::on_generator(bank, form.mix, form.scale);
            driver.drive(Arc::new(workload), Started::default())
        }
    }
}
