//! The bank's choices: its transaction mix (TPC-B, the ATM operations with
//! their weights, or pgbench's tpcb-like script) and the isolation level of
//! its transactions on a server.

use serde::{Deserialize, Serialize};

/// The transaction mix of the bank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum BankMix {
    /// TPC-B's one transaction profile.
    Tpcb,
    /// Balance inquiries, withdrawals, deposits and transfers.
    Atm(AtmWeights),
    /// pgbench's built-in tpcb-like transaction on pgbench's own tables.
    Pgbench,
}

/// Relative weights of the ATM operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AtmWeights {
    pub(crate) balance: u32,
    pub(crate) withdraw: u32,
    pub(crate) deposit: u32,
    pub(crate) transfer: u32,
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
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
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
        let mix = BankMix::Atm(weights);
        mix.check()?;
        Ok(mix)
    }

    /// Whether the ATM weights can be drawn from: each at most
    /// [`MAX_WEIGHT`] (their sum is drawn in 32 bits), not all zero.
    pub(crate) fn check(&self) -> Result<(), String> {
        let BankMix::Atm(w) = self else {
            return Ok(());
        };
        let each = [w.balance, w.withdraw, w.deposit, w.transfer];
        if each.iter().any(|&weight| weight > MAX_WEIGHT) {
            return Err(format!("an ATM weight is above {MAX_WEIGHT}"));
        }
        if each.iter().all(|&weight| weight == 0) {
            return Err("the ATM weights add up to zero".to_string());
        }
        Ok(())
    }
}

/// The largest ATM weight: four of them add up within `u32`.
pub(crate) const MAX_WEIGHT: u32 = 1_000_000;

/// Transaction isolation on server databases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Isolation {
    ReadCommitted,
    RepeatableRead,
    Serializable,
}

impl Isolation {
    /// The SQL words for it.
    pub(crate) fn sql(&self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "READ COMMITTED",
            Isolation::RepeatableRead => "REPEATABLE READ",
            Isolation::Serializable => "SERIALIZABLE",
        }
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
}
