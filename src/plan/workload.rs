//! Workload specifications: which workload, its target and its knobs.

use super::serde_duration;
use super::Target;
use crate::units::parse_duration;
use serde::Serialize;
use std::time::Duration;

/// What each virtual user does.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum WorkloadSpec {
    /// Does nothing, or sleeps a service time: for testing the engine.
    Null {
        #[serde(with = "serde_duration")]
        service: Duration,
        stall: Option<NullStall>,
    },
    /// The all-electronic bank (TPC-B schema).
    Bank {
        target: Target,
        /// Scale units: 1 branch, 10 tellers, 100,000 accounts each.
        scale: u32,
        mix: BankMix,
        /// Drop and reload the tables even when a loaded database of the same scale exists.
        reload: bool,
        /// Isolation level of every transaction (server databases).
        isolation: Isolation,
        /// Tries per transaction on serialisation failures and deadlocks.
        max_tries: u32,
        /// Settings of a managed server (`--pg-set NAME=VALUE`).
        server_settings: Vec<(String, String)>,
        /// Keep a managed server's data directory after the run.
        keep: bool,
        /// Managed server: the CPUs it may run on (all when empty).
        server_cpus: Vec<usize>,
    },
}

impl WorkloadSpec {
    /// The workload's name, as typed on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            WorkloadSpec::Null { .. } => "null",
            WorkloadSpec::Bank { .. } => "bank",
        }
    }

    /// The target, as stored (credentials redacted).
    pub fn target(&self) -> Target {
        match self {
            WorkloadSpec::Null { .. } => Target::InProcess,
            WorkloadSpec::Bank { target, .. } => target.clone(),
        }
    }
}

/// Transaction isolation on server databases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    ReadCommitted,
    RepeatableRead,
    Serializable,
}

impl Isolation {
    /// Parses `read-committed`, `repeatable-read` or `serializable`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "read-committed" => Ok(Isolation::ReadCommitted),
            "repeatable-read" => Ok(Isolation::RepeatableRead),
            "serializable" => Ok(Isolation::Serializable),
            other => Err(format!(
                "'{other}' is not an isolation level; use read-committed, repeatable-read or serializable"
            )),
        }
    }

    /// The SQL words for it.
    pub fn sql(&self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "READ COMMITTED",
            Isolation::RepeatableRead => "REPEATABLE READ",
            Isolation::Serializable => "SERIALIZABLE",
        }
    }
}

/// A window during which the null target answers nothing: every operation
/// that would run inside it completes only when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NullStall {
    /// When the stall starts, counted from the start of the run.
    #[serde(with = "serde_duration")]
    pub at: Duration,
    /// How long it lasts.
    #[serde(with = "serde_duration")]
    pub length: Duration,
}

impl NullStall {
    /// Parses `AT:LENGTH`, e.g. `3s:1s`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (at, length) = text
            .split_once(':')
            .ok_or_else(|| format!("'{text}' needs the form AT:LENGTH, e.g. 3s:1s"))?;
        Ok(NullStall {
            at: parse_duration(at).map_err(|e| e.to_string())?,
            length: parse_duration(length).map_err(|e| e.to_string())?,
        })
    }
}

/// The transaction mix of the bank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BankMix {
    /// TPC-B's one transaction profile.
    Tpcb,
    /// Balance inquiries, withdrawals, deposits and transfers.
    Atm(AtmWeights),
    /// pgbench's built-in tpcb-like transaction on pgbench's own tables.
    Pgbench,
}

/// Relative weights of the ATM operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AtmWeights {
    pub balance: u32,
    pub withdraw: u32,
    pub deposit: u32,
    pub transfer: u32,
}

impl Default for AtmWeights {
    fn default() -> Self {
        AtmWeights {
            balance: 40,
            withdraw: 30,
            deposit: 20,
            transfer: 10,
        }
    }
}

impl BankMix {
    /// Parses `tpcb`, `atm` or `atm:balance=40,withdraw=30,deposit=20,transfer=10`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text == "tpcb" {
            return Ok(BankMix::Tpcb);
        }
        if text == "pgbench" {
            return Ok(BankMix::Pgbench);
        }
        let Some(rest) = text.strip_prefix("atm") else {
            return Err(format!(
                "'{text}' is not a bank mix; use tpcb, atm or pgbench"
            ));
        };
        let mut weights = AtmWeights::default();
        let Some(list) = rest.strip_prefix(':') else {
            return if rest.is_empty() {
                Ok(BankMix::Atm(weights))
            } else {
                Err(format!("'{text}' is not a bank mix; use tpcb or atm"))
            };
        };
        weights = AtmWeights {
            balance: 0,
            withdraw: 0,
            deposit: 0,
            transfer: 0,
        };
        for pair in list.split(',') {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("'{pair}' needs the form NAME=WEIGHT"))?;
            let value: u32 = value
                .trim()
                .parse()
                .map_err(|_| format!("'{value}' is not a whole-number weight"))?;
            let slot = match name.trim() {
                "balance" => &mut weights.balance,
                "withdraw" => &mut weights.withdraw,
                "deposit" => &mut weights.deposit,
                "transfer" => &mut weights.transfer,
                other => {
                    return Err(format!(
                    "'{other}' is not an ATM operation; use balance, withdraw, deposit or transfer"
                ))
                }
            };
            *slot = value;
        }
        if weights.balance + weights.withdraw + weights.deposit + weights.transfer == 0 {
            return Err("the ATM weights add up to zero".to_string());
        }
        Ok(BankMix::Atm(weights))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_parse() {
        assert_eq!(BankMix::parse("tpcb").unwrap(), BankMix::Tpcb);
        assert_eq!(
            BankMix::parse("atm").unwrap(),
            BankMix::Atm(AtmWeights::default())
        );
        let BankMix::Atm(w) = BankMix::parse("atm:balance=1,transfer=3").unwrap() else {
            panic!("not atm")
        };
        assert_eq!((w.balance, w.withdraw, w.transfer), (1, 0, 3));
        assert!(BankMix::parse("tpcc").is_err());
        assert!(BankMix::parse("atm:loan=3").is_err());
        assert!(BankMix::parse("atm:balance=0").is_err());
    }

    #[test]
    fn stalls_parse() {
        let s = NullStall::parse("3s:1s").unwrap();
        assert_eq!(s.at, Duration::from_secs(3));
        assert_eq!(s.length, Duration::from_secs(1));
        assert!(NullStall::parse("3s").is_err());
    }
}
