//! Integration tests: the engine on the null workload (in process), and the
//! CLI end to end on the embedded SQLite bank, the results store and bad input.

mod accel;
mod agent;
mod bank;
mod cli;
mod defaults;
mod disk;
mod engine;
mod faults;
mod files;
mod generators;
mod golden;
mod help;
mod host;
mod injection;
mod kube;
mod lab;
mod lab_live;
mod link;
mod live;
mod mariadb;
mod net;
mod outputs;
mod postgres;
mod probes;
mod props;
mod qdisc;
mod queue;
mod report;
mod signals;
mod store_busy;
mod stored;
mod support;
mod units;
mod varnish;
mod web;
