//! What-if knobs: servers perflab creates and configures itself. For now, a
//! managed PostgreSQL (`--target postgres:managed`).

pub mod managed_pg;
