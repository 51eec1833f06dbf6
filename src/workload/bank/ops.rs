//! The bank's transactions and how a user picks them. TPC-B (clause 5):
//! a teller chosen uniformly, the branch that teller belongs to, an account
//! of that branch 85% of the time and of another branch 15% of the time
//! (when there is one), a delta uniform in ±999,999.

use super::mix::{AtmWeights, BankMix};
use rand::rngs::SmallRng;
use rand::Rng;

/// Accounts per branch (TPC-B clause 4.2).
pub(crate) const ACCOUNTS_PER_BRANCH: i64 = 100_000;
/// The largest `--scale`: 100,000 units of 100,000 accounts.
pub(crate) const MAX_SCALE: u32 = 100_000;
/// Tellers per branch.
pub(crate) const TELLERS_PER_BRANCH: i64 = 10;
/// Every account's opening balance, in cents.
pub(crate) const INITIAL_BALANCE: i64 = 100_000;
/// Largest ATM withdrawal, deposit or transfer, in cents.
pub(crate) const MAX_ATM_AMOUNT: i64 = 20_000;
/// TPC-B's delta range: uniform in ±999,999.
pub(crate) const MAX_TPCB_DELTA: i64 = 999_999;
/// pgbench's tpcb-like delta range: uniform in ±5,000.
pub(crate) const PGBENCH_MAX_DELTA: i64 = 5_000;

/// One bank transaction with its arguments drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BankOp {
    /// TPC-B: update the account, read its balance, update teller and
    /// branch, insert history, commit.
    Tpcb {
        aid: i64,
        tid: i64,
        bid: i64,
        delta: i64,
    },
    /// Read one balance.
    Balance { aid: i64 },
    /// Debit an account if its balance covers the amount; else refused.
    Withdraw {
        aid: i64,
        tid: i64,
        bid: i64,
        amount: i64,
    },
    /// Credit an account.
    Deposit {
        aid: i64,
        tid: i64,
        bid: i64,
        amount: i64,
    },
    /// Move money between two accounts if the first covers it; else refused.
    Transfer {
        from: i64,
        to: i64,
        tid: i64,
        bid: i64,
        amount: i64,
    },
}

/// The operation kinds of a mix, in the order the engine names them.
pub(crate) fn op_names(mix: BankMix) -> &'static [&'static str] {
    match mix {
        BankMix::Tpcb => &["tpcb"],
        BankMix::Pgbench => &["tpcb-like"],
        BankMix::Atm(_) => &["balance", "withdraw", "deposit", "transfer"],
    }
}

/// History rows one committed operation of each kind writes.
pub(crate) fn history_rows(mix: BankMix, op: usize) -> u64 {
    match (mix, op) {
        (BankMix::Tpcb | BankMix::Pgbench, _) => 1,
        (BankMix::Atm(_), 0) => 0,
        (BankMix::Atm(_), 3) => 2,
        (BankMix::Atm(_), _) => 1,
    }
}

/// Draws operations for one user.
#[derive(Debug, Clone)]
pub(crate) struct OpPicker {
    mix: BankMix,
    branches: i64,
    /// Cumulative ATM weights: balance, withdraw, deposit, transfer.
    cumulative: [u32; 4],
}

impl OpPicker {
    pub(crate) fn new(mix: BankMix, scale: u32) -> Self {
        let w = match mix {
            BankMix::Atm(w) => w,
            BankMix::Tpcb | BankMix::Pgbench => AtmWeights::default(),
        };
        let mut cumulative = [w.balance, w.withdraw, w.deposit, w.transfer];
        for i in 1..4 {
            cumulative[i] += cumulative[i - 1];
        }
        OpPicker {
            mix,
            branches: i64::from(scale.max(1)),
            cumulative,
        }
    }

    /// Picks the kind of the next operation.
    pub(crate) fn choose(&self, rng: &mut SmallRng) -> usize {
        match self.mix {
            BankMix::Tpcb | BankMix::Pgbench => 0,
            BankMix::Atm(_) => {
                let x = rng.gen_range(0..self.cumulative[3]);
                self.cumulative.iter().position(|&c| x < c).unwrap_or(3)
            }
        }
    }

    /// Draws the arguments of an operation of kind `op`.
    pub(crate) fn draw(&self, op: usize, rng: &mut SmallRng) -> BankOp {
        if self.mix == BankMix::Pgbench {
            // pgbench's tpcb-like script: four independent uniform draws.
            return BankOp::Tpcb {
                aid: rng.gen_range(1..=self.branches * ACCOUNTS_PER_BRANCH),
                bid: rng.gen_range(1..=self.branches),
                tid: rng.gen_range(1..=self.branches * TELLERS_PER_BRANCH),
                delta: rng.gen_range(-PGBENCH_MAX_DELTA..=PGBENCH_MAX_DELTA),
            };
        }
        let tid = rng.gen_range(1..=self.branches * TELLERS_PER_BRANCH);
        let bid = (tid - 1) / TELLERS_PER_BRANCH + 1;
        let aid = self.account_for(bid, rng);
        let amount = rng.gen_range(1..=MAX_ATM_AMOUNT);
        match (self.mix, op) {
            (BankMix::Tpcb | BankMix::Pgbench, _) => BankOp::Tpcb {
                aid,
                tid,
                bid,
                delta: rng.gen_range(-MAX_TPCB_DELTA..=MAX_TPCB_DELTA),
            },
            (BankMix::Atm(_), 0) => BankOp::Balance { aid },
            (BankMix::Atm(_), 1) => BankOp::Withdraw {
                aid,
                tid,
                bid,
                amount,
            },
            (BankMix::Atm(_), 2) => BankOp::Deposit {
                aid,
                tid,
                bid,
                amount,
            },
            (BankMix::Atm(_), _) => {
                let accounts = self.branches * ACCOUNTS_PER_BRANCH;
                // Uniform over every account but `aid`.
                let mut to = rng.gen_range(1..accounts);
                if to >= aid {
                    to += 1;
                }
                BankOp::Transfer {
                    from: aid,
                    to,
                    tid,
                    bid,
                    amount,
                }
            }
        }
    }

    /// An account of branch `bid` 85% of the time, else of another branch.
    fn account_for(&self, bid: i64, rng: &mut SmallRng) -> i64 {
        let branch = if self.branches > 1 && rng.gen_range(0..100) >= 85 {
            let other = rng.gen_range(1..self.branches);
            if other >= bid {
                other + 1
            } else {
                other
            }
        } else {
            bid
        };
        (branch - 1) * ACCOUNTS_PER_BRANCH + rng.gen_range(1..=ACCOUNTS_PER_BRANCH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn tpcb_draws_follow_the_spec() {
        let picker = OpPicker::new(BankMix::Tpcb, 4);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut remote = 0;
        let n = 20_000;
        for _ in 0..n {
            let BankOp::Tpcb {
                aid,
                tid,
                bid,
                delta,
            } = picker.draw(0, &mut rng)
            else {
                panic!("not tpcb")
            };
            assert!((1..=40).contains(&tid));
            assert_eq!(bid, (tid - 1) / 10 + 1);
            assert!((1..=400_000).contains(&aid));
            assert!(delta.abs() <= MAX_TPCB_DELTA);
            if (aid - 1) / ACCOUNTS_PER_BRANCH + 1 != bid {
                remote += 1;
            }
        }
        let share = f64::from(remote) / f64::from(n);
        assert!((share - 0.15).abs() < 0.01, "remote share {share}");
    }

    #[test]
    fn one_branch_keeps_every_account_home() {
        let picker = OpPicker::new(BankMix::Tpcb, 1);
        let mut rng = SmallRng::seed_from_u64(2);
        for _ in 0..1000 {
            let BankOp::Tpcb { aid, bid, .. } = picker.draw(0, &mut rng) else {
                panic!()
            };
            assert_eq!(bid, 1);
            assert!((1..=100_000).contains(&aid));
        }
    }

    #[test]
    fn atm_weights_are_honoured() {
        let picker = OpPicker::new(BankMix::Atm(AtmWeights::default()), 1);
        let mut rng = SmallRng::seed_from_u64(3);
        let mut seen = [0u32; 4];
        for _ in 0..40_000 {
            seen[picker.choose(&mut rng)] += 1;
        }
        let shares: Vec<f64> = seen.iter().map(|&s| f64::from(s) / 40_000.0).collect();
        for (share, want) in shares.iter().zip([0.4, 0.3, 0.2, 0.1]) {
            assert!((share - want).abs() < 0.01, "{shares:?}");
        }
        for _ in 0..1000 {
            if let BankOp::Transfer { from, to, .. } = picker.draw(3, &mut rng) {
                assert_ne!(from, to);
                assert!((1..=100_000).contains(&to));
            }
        }
    }
}
