//! The bytes between perflab and its own peers (its agents, and the
//! coordinator of many generators): TCP, in plain text on loopback or in
//! TLS beyond it, every read and write bounded by one deadline, and an
//! HTTP/1 answer read whole ([`answer`]). Below the probes, which read
//! agents and node_exporters through it, and the agent, which serves
//! through it; the HTTPS targets take their certificate checks from here.

pub(crate) mod answer;
pub(crate) mod echo;
pub(crate) mod stream;
pub(crate) mod tls;

pub(crate) use stream::Wire;
