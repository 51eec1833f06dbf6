//! What more or less memory would do for a server that caches its data in
//! it: how many of an operation's page accesses would miss the cache and
//! go to storage, from what one run measured.
//!
//! The cache is taken as one LRU over the relations the server reports
//! (PostgreSQL's tables and indexes apart: an index's pages are hotter
//! than its table's), each page of a relation asked for as often as the
//! others — the independent reference model, solved by Che's
//! approximation (Che, Tung and Wang, 2002; its accuracy for LRU shown by
//! Fricker, Robert and Roberts, 2012): a page stays while it is asked for
//! again within the cache's characteristic time T, which solves
//! `Σ n_i (1 − e^(−a_i T / n_i)) = C` for relations of `n_i` pages asked
//! for `a_i` times per operation and a cache of `C` pages; an operation
//! then misses `Σ a_i e^(−a_i T / n_i)` pages.
//!
//! The cache a server has is found from what it missed: the size at which
//! the model misses as many pages per operation as the server read from
//! storage. It is not the memory limit less the processes' own memory:
//! on this lab's PostgreSQL under a 96 MiB limit (10 MiB of it the
//! processes'), the reads said 25 MiB, as the server's buffers hold
//! pages the page cache holds too and the kernel's reclaim keeps no
//! ideal LRU. So a run whose data fit in memory says nothing of the cache
//! a smaller limit would leave, and gets no prediction for one.
//!
//! What is not cache is mostly fixed (the processes, the buffers' second
//! copy, the kernel's own), so a change of memory moves the found cache by
//! a share of the difference: between all of it and half of it, three
//! quarters the estimate. Measured on the same PostgreSQL: 48 MiB more
//! (96 to 144 MiB) grew the cache its reads said from 25–27 MiB to 60 MiB,
//! 71% of the difference; 96 MiB more held all 120 MiB of its data.
//!
//! InnoDB caches its pages in a buffer pool of its own, sized by
//! `innodb_buffer_pool_size` and read past the page cache (O_DIRECT, its
//! default since MariaDB 10.6): the pool is the cache, and a change of its
//! size is the change of memory to predict. Its relations are a table's
//! rows and its secondary indexes ([`crate::sut::mysql`]'s relations), its
//! misses `Innodb_buffer_pool_reads`, and the cache is still found from
//! them. But the pool does not hold as many pages of data as it has:
//! while it reads, MariaDB's page cleaner keeps up to
//! `innodb_lru_scan_depth` pages of it (1536 by default) free for the next
//! reads, evicting in batches. On the bank at scale 4 (51 MiB of tables)
//! through 300 read IOPS, a pool of 8 MiB (507 pages) held 74–185 pages
//! of data while it read, 16 MiB 138–236, 32 MiB 495–1244
//! (`Innodb_buffer_pool_pages_data`, looked at every 5 s); the caches its
//! misses said were 95, 65 and 940 pages. So a change of the pool moves
//! the found cache by between none of the difference and all of it, half
//! the estimate: of the differences between those three runs, 8 → 16 MiB
//! moved it by none, 8 → 32 MiB by 56%, 16 → 32 MiB by 86%.

use super::points::StepPoint;
use crate::units::Bytes;

/// The bytes of a page the server reads and reports accesses in:
/// PostgreSQL's block size as built by default.
pub(crate) const PAGE_BYTES: f64 = 8192.0;

/// A change of memory to predict, in bytes: a cgroup's limit, or the size
/// of a buffer pool the server keeps itself (InnoDB's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Memory {
    Limit(f64),
    Pool(f64),
}

/// A relation the server reported: its pages and how many times an
/// operation asked for one of them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Relation {
    pub(crate) name: String,
    pub(crate) pages: f64,
    pub(crate) per_op: f64,
}

/// Pages an operation misses with a cache of `cache` pages over
/// `relations`.
pub(crate) fn misses(relations: &[Relation], cache: f64) -> f64 {
    let total: f64 = relations.iter().map(|r| r.pages).sum();
    if cache >= total {
        return 0.0;
    }
    let asked: f64 = relations.iter().map(|r| r.per_op).sum();
    if cache <= 0.0 {
        return asked;
    }
    let held = |t: f64| -> f64 {
        relations
            .iter()
            .map(|r| r.pages * (1.0 - (-r.per_op * t / r.pages).exp()))
            .sum()
    };
    // The characteristic time, in operations: held(t) grows from 0 to the
    // relations' pages; double until it passes the cache, then halve the
    // bracket.
    let (mut lo, mut hi) = (0.0, 1.0);
    for _ in 0..200 {
        if held(hi) >= cache {
            break;
        }
        lo = hi;
        hi *= 2.0;
    }
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if held(mid) < cache {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let t = (lo + hi) / 2.0;
    relations
        .iter()
        .map(|r| r.per_op * (-r.per_op * t / r.pages).exp())
        .sum()
}

/// The cache, in pages, with which an operation misses `missed` pages;
/// none when no cache misses that many (more than every access) or the
/// relations are empty.
pub(crate) fn cache_for(relations: &[Relation], missed: f64) -> Option<f64> {
    let total: f64 = relations.iter().map(|r| r.pages).sum();
    let asked: f64 = relations.iter().map(|r| r.per_op).sum();
    if total <= 0.0 || !(0.0..asked).contains(&missed) {
        return None;
    }
    let (mut lo, mut hi) = (0.0, total);
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if misses(relations, mid) > missed {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some((lo + hi) / 2.0)
}

/// What one step says of the server's cache.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cache {
    pub(crate) relations: Vec<Relation>,
    /// The bytes of the server's page.
    pub(crate) page_bytes: f64,
    /// Whether the cache is a buffer pool the server sizes itself
    /// (InnoDB's), rather than what a cgroup's memory limit leaves.
    pub(crate) pool: bool,
    /// The server's cgroup memory limit, or its buffer pool's size, bytes.
    pub(crate) limit_bytes: f64,
    /// The processes' own memory, bytes: not cache.
    pub(crate) anon_bytes: f64,
    /// Pages read from storage per operation.
    pub(crate) missed: f64,
    /// The cache, pages, found from the misses (when the run read enough
    /// to say).
    pub(crate) found: Option<f64>,
}

/// The least share of a change of memory the cache is taken to gain or
/// lose (all of it at most).
const LEAST_SHARE: f64 = 0.5;

/// The least share of a change of a buffer pool's size its cache is taken
/// to gain or lose: none (its page cleaner may keep what it gains free).
const POOL_LEAST_SHARE: f64 = 0.0;

/// Reads under this share of the accesses are no measure of the cache:
/// the data fits, and what was read is the odd page the run first touched.
const MEASURABLE: f64 = 0.01;

impl Cache {
    /// The cache of the server at step `p`: its relations as its
    /// statistics reported them, and its buffer pool (InnoDB) or else its
    /// cgroup's memory; none when it has neither, no relations or no
    /// operations.
    pub(crate) fn of(p: &StepPoint) -> Option<Cache> {
        let ops = p.completed as f64;
        if ops <= 0.0 || p.throughput <= 0.0 {
            return None;
        }
        let (page_bytes, limit_bytes, anon_bytes, missed, pool) = match buffer_pool(p) {
            Some((pages, page_bytes, reads)) => {
                (page_bytes, pages * page_bytes, 0.0, reads / ops, true)
            }
            None => {
                let limit = p.extras.memory_limit_bytes.filter(|l| *l > 0.0)?;
                let anon = p.extras.memory_anon_bytes.unwrap_or(0.0).max(0.0);
                let read = p.extras.server_read_bytes_per_s.unwrap_or(0.0).max(0.0);
                (
                    PAGE_BYTES,
                    limit,
                    anon,
                    read / PAGE_BYTES / p.throughput,
                    false,
                )
            }
        };
        let relations: Vec<Relation> =
            p.db.iter()
                .filter_map(|(k, accesses)| {
                    let name = k.strip_prefix(crate::probe::RELATION_ACCESSES)?;
                    let bytes =
                        p.db.get(&format!("{}{name}", crate::probe::RELATION_BYTES))?;
                    let pages = (bytes / page_bytes).ceil();
                    (pages >= 1.0 && *accesses > 0.0).then(|| Relation {
                        name: name.to_string(),
                        pages,
                        per_op: accesses / ops,
                    })
                })
                .collect();
        if relations.is_empty() {
            return None;
        }
        let asked: f64 = relations.iter().map(|r| r.per_op).sum();
        let found = (missed >= MEASURABLE * asked)
            .then(|| cache_for(&relations, missed))
            .flatten();
        Some(Cache {
            relations,
            page_bytes,
            pool,
            limit_bytes,
            anon_bytes,
            missed,
            found,
        })
    }

    /// The relations' pages together: the working set the cache would
    /// have to hold.
    pub(crate) fn pages(&self) -> f64 {
        self.relations.iter().map(|r| r.pages).sum()
    }

    /// The memory limit whose cache holds every relation at both ends of
    /// its range (half of the memory added a cache); a pool's, at the
    /// middle of its range (at its low end no pool is sure to). None
    /// without a cache found.
    pub(crate) fn holding_all(&self) -> Option<f64> {
        let found = self.found?;
        let short = (self.pages() - found).max(0.0);
        let share = self.least_share().max(LEAST_SHARE);
        Some(self.limit_bytes + short * self.page_bytes / share)
    }

    /// The least share of a change of memory the cache gains or loses.
    fn least_share(&self) -> f64 {
        if self.pool {
            POOL_LEAST_SHARE
        } else {
            LEAST_SHARE
        }
    }

    /// The sizes to predict: `memory` alone when asked; else half
    /// the limit (when the processes' own memory leaves the half room for a
    /// cache), and, when the data does not fit, twice the limit (while that
    /// still falls short) and the limit that holds it all at both ends of
    /// the cache's range.
    /// A buffer pool gets no prediction for a memory limit (the limit
    /// does not size it), nor a cgroup's cache for a pool's size.
    pub(crate) fn sizes(&self, memory: Option<Memory>) -> Vec<f64> {
        match (memory, self.pool) {
            (Some(Memory::Limit(m)), false) | (Some(Memory::Pool(m)), true) => return vec![m],
            (Some(_), _) => return Vec::new(),
            (None, _) => {}
        }
        let c = self;
        let now = c.limit_bytes;
        let Some(all) = c.holding_all() else {
            return Vec::new();
        };
        let all = (all / MIB).ceil() * MIB;
        let mut out = Vec::new();
        if now / 2.0 > c.anon_bytes {
            out.push(now / 2.0);
        }
        if now < all {
            if now * 2.0 < all {
                out.push(now * 2.0);
            }
            out.push(all);
        }
        out
    }

    /// Pages an operation would miss with a memory limit of `bytes`: at
    /// the middle of the cache's two ends, the fewest and the most; none
    /// when the run did not read enough to find its cache.
    pub(crate) fn missed_at(&self, bytes: f64) -> Option<[f64; 3]> {
        let found = self.found?;
        let change = (bytes - self.limit_bytes) / self.page_bytes;
        let cache = |share: f64| (found + share * change).max(0.0);
        let m = |share: f64| misses(&self.relations, cache(share));
        let least = self.least_share();
        let (all, part) = (m(1.0), m(least));
        Some([m((1.0 + least) / 2.0), all.min(part), all.max(part)])
    }
}

/// The server's reads from storage as a queueing centre: the cache that
/// decides how many there are, and the read limit on its cgroup that
/// decides how fast they go.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reads {
    /// `reads (a blkio throttle of 300 read IOPS on the server's cgroup)`.
    pub(crate) name: String,
    pub(crate) cache: Cache,
    /// Pages per second the limit lets through.
    pub(crate) pages_per_s: f64,
}

/// InnoDB's buffer pool at step `p`: its pages, the bytes of a page and
/// the pages it read from storage; none for a server without one.
fn buffer_pool(p: &StepPoint) -> Option<(f64, f64, f64)> {
    let pages = p.db.get("buffer_pool_pages").filter(|n| **n > 0.0)?;
    let page = p.db.get("page_bytes").filter(|b| **b > 0.0)?;
    let reads = p.db.get("buffer_pool_reads")?.max(0.0);
    Some((*pages, *page, reads))
}

/// The server's reads at step `p`, when it has a cache the run measured
/// and a read limit on its cgroup: without the limit, the read path's
/// capacity was not measured (a device's own reads are not told apart
/// from the other I/O on it).
pub(crate) fn reads(p: &StepPoint) -> Option<Reads> {
    let cache = Cache::of(p)?;
    let page = cache.page_bytes;
    let (limit, pages_per_s) = p
        .io_path
        .limits
        .iter()
        .filter(|l| l.owner == super::bottleneck::server_cgroup::SERVER)
        .filter_map(|l| {
            // Pages per read the server issued through the limit (one at
            // least: a read is a page or more).
            let per_read = if l.reads_per_s > 0.0 {
                (l.read_bytes_per_s / l.reads_per_s / page).max(1.0)
            } else {
                1.0
            };
            let by_iops = l.limit.read_iops.map(|n| n as f64 * per_read);
            let by_bytes = l.limit.read_bps.map(|b| b as f64 / page);
            let pages = match (by_iops, by_bytes) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a.or(b)?,
            };
            (pages > 0.0).then_some((l, pages))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    let what = match (limit.limit.read_iops, limit.limit.read_bps) {
        (Some(n), _) => format!("{n} read IOPS"),
        (None, Some(b)) => format!("{}/s read", Bytes(b)),
        (None, None) => return None,
    };
    Some(Reads {
        name: format!("reads ({})", limit.described(&what)),
        cache,
        pages_per_s,
    })
}

/// A mebibyte.
const MIB: f64 = 1024.0 * 1024.0;

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(name: &str, pages: f64, per_op: f64) -> Relation {
        Relation {
            name: name.to_string(),
            pages,
            per_op,
        }
    }

    /// One relation asked for uniformly: an LRU holding a share of it
    /// misses about the rest of the share, exactly as Che's approximation
    /// gives for one class, `e^(−aT/n)` with `n(1 − e^(−aT/n)) = C`.
    #[test]
    fn one_uniform_relation_misses_what_does_not_fit() {
        let r = [rel("t", 1000.0, 1.0)];
        assert_eq!(misses(&r, 1000.0), 0.0);
        assert_eq!(misses(&r, 0.0), 1.0);
        for held in [100.0, 500.0, 900.0] {
            let m = misses(&r, held);
            assert!((m - (1.0 - held / 1000.0)).abs() < 1e-9, "{held}: {m}");
        }
    }

    /// A hot index beside a cold table: with room for the index the cache
    /// keeps it, and the misses are the table's.
    #[test]
    fn a_hot_relation_is_held_before_a_cold_one() {
        let r = [rel("index", 100.0, 2.0), rel("table", 10_000.0, 1.0)];
        let m = misses(&r, 1100.0);
        // The table's share held is about a tenth: it misses ~0.9 of its
        // one access; the index almost never.
        assert!((0.88..0.92).contains(&m), "{m}");
        assert!(misses(&r, 5000.0) < m);
    }

    /// The cache that misses a given number of pages is found again.
    #[test]
    fn the_cache_is_found_from_its_misses() {
        let r = [rel("index", 100.0, 2.0), rel("table", 10_000.0, 1.0)];
        for cache in [50.0, 1100.0, 6000.0] {
            let m = misses(&r, cache);
            let found = cache_for(&r, m).unwrap();
            assert!((found / cache - 1.0).abs() < 1e-3, "{cache}: {found}");
        }
        assert_eq!(cache_for(&r, 3.5), None, "more than every access");
        assert_eq!(cache_for(&[], 0.5), None);
    }

    /// Steps of a closed loop at 1–16 users whose server read
    /// `read_per_op` pages of `page` bytes per operation through a read
    /// limit of 300 IOPS on its cgroup, and reported `relations` (name,
    /// pages, accesses per operation).
    fn reading(relations: &[(&str, f64, f64)], page: f64, read_per_op: f64) -> Vec<StepPoint> {
        use crate::analyze::iopath::LimitUse;
        let mut points = crate::analyze::fixture::mva_points(
            0.0003,
            read_per_op / 300.0,
            0.0,
            &[1, 2, 4, 8, 16],
        );
        for p in &mut points {
            p.resources
                .retain(|r| r.kind != crate::analyze::points::ResourceKind::Disk);
            let reads = p.throughput * read_per_op;
            let ops = p.completed as f64;
            for (name, pages, per_op) in relations {
                p.db.insert(
                    format!("{}{name}", crate::probe::RELATION_ACCESSES),
                    per_op * ops,
                );
                p.db.insert(
                    format!("{}{name}", crate::probe::RELATION_BYTES),
                    pages * page,
                );
            }
            let mut limit = LimitUse::default_for_tests();
            limit.owner = super::super::bottleneck::server_cgroup::SERVER.to_string();
            limit.limit.read_iops = Some(300);
            limit.limit.interface = "blkio throttle".to_string();
            limit.reads_per_s = reads;
            limit.read_bytes_per_s = reads * page;
            p.io_path.limits = vec![limit];
        }
        points
    }

    /// The verdict of a run whose server was short of memory for its reads.
    fn memory_short() -> crate::analyze::bottleneck::Bottleneck {
        use crate::analyze::bottleneck::{Bottleneck, BottleneckKind};
        Bottleneck {
            kind: BottleneckKind::Resource,
            name: "memory → disk reads".to_string(),
            evidence: Vec::new(),
            ruled_out: Vec::new(),
            unreliable: false,
            next: None,
            resource: None,
        }
    }

    /// A run whose server read 1.05 pages per operation of a table and its
    /// index through a read limit of 300 IOPS under a 96 MiB limit (10 MiB
    /// of it its processes').
    fn under_96_mib() -> Vec<StepPoint> {
        const MIB: f64 = 1048576.0;
        let relations = [("t", 13_115.0, 1.0), ("t_pkey", 2_196.0, 3.0)];
        let mut points = reading(&relations, PAGE_BYTES, 1.05);
        for p in &mut points {
            p.extras.memory_limit_bytes = Some(96.0 * MIB);
            p.extras.memory_anon_bytes = Some(10.0 * MIB);
            p.extras.server_read_bytes_per_s = Some(p.throughput * 1.05 * PAGE_BYTES);
        }
        points
    }

    /// A run whose server read 1.05 pages per operation through a read
    /// limit of 300 IOPS under a 96 MiB limit: the cache found from those
    /// reads misses as many again at that limit; half the memory reads
    /// more and is slower, still held by the reads; the memory that holds
    /// every relation reads none, and its figure — the CPU, measured at a
    /// tenth busy — is a floor.
    #[test]
    fn a_run_that_read_through_a_limit_predicts_more_and_less_memory() {
        const MIB: f64 = 1048576.0;
        let points = under_96_mib();
        let peak = 4;
        let r = reads(&points[peak]).expect("a cache and a read limit");
        assert_eq!(r.pages_per_s, 300.0);
        let [at_now, ..] = r.cache.missed_at(96.0 * MIB).unwrap();
        assert!((at_now / 1.05 - 1.0).abs() < 0.01, "{at_now}");
        let demands = crate::analyze::demands::demands(&points, true, Some(peak));
        let w = super::super::whatif::what_if(&points, &demands, &memory_short(), true, peak, None)
            .expect("predictions for memory");
        let of = |mib: f64| {
            w.scenarios
                .iter()
                .find(|s| s.server_memory == Some(mib * MIB))
                .unwrap_or_else(|| panic!("no {mib} MiB in {w:#?}"))
        };
        let measured = points[peak].throughput;
        let half = of(48.0);
        assert!(half.throughput < 0.8 * measured, "{half:?}");
        assert!(half.still && !half.at_least, "{half:?}");
        let most = w
            .scenarios
            .iter()
            .filter_map(|s| s.server_memory)
            .fold(0.0, f64::max);
        let all = of(most / MIB);
        assert!(
            most > 130.0 * MIB,
            "the processes' memory and every page, at least: {most}"
        );
        assert!(all.change.contains("none of its pages"), "{}", all.change);
        assert!(all.at_least && all.interval.is_none(), "{all:?}");
        assert!(all.throughput > 5.0 * measured, "{all:?}");
    }

    /// A cache that reads most pages it misses from the kernel's page
    /// cache, not the device: the reads' demand the read limit gives (1.05
    /// pages at 300 a second, 3.5 ms) is more than the lowest load's whole
    /// response (1 ms: most operations took 500 µs or less), so the delay
    /// outside the queues comes out as none. The memory that reads none
    /// then predicts the peak's one user at no less than the body of that
    /// user's responses took, reads and all (2,000 a second at most):
    /// without that, its floor was the CPU's 300 µs alone, 3,333 a
    /// second, as a PostgreSQL cell's floor for one user in 1 GiB read 63
    /// µs an operation where 83 was measured.
    #[test]
    fn a_floor_at_the_lowest_load_is_held_to_its_body_s_time() {
        let mut points = under_96_mib();
        points[0].response.mean = std::time::Duration::from_millis(1);
        points[0].response.p50 = std::time::Duration::from_micros(500);
        let peak = 0;
        let demands = crate::analyze::demands::demands(&points, true, Some(peak));
        let w = super::super::whatif::what_if(&points, &demands, &memory_short(), true, peak, None)
            .expect("predictions for memory");
        let all = w
            .scenarios
            .iter()
            .find(|s| s.change.contains("none of its pages"))
            .unwrap_or_else(|| panic!("no memory that holds it all in {w:#?}"));
        let one = all.at_peak.expect("a prediction at the peak's one user");
        assert_eq!(one.load, 1.0);
        assert!(one.at_least, "{one:?}");
        assert!(
            one.throughput > 0.0 && one.throughput <= 2000.0 * 1.0001,
            "{one:?}"
        );
        // At the highest load the CPU's bound holds it, as before.
        assert!(
            all.at_least && all.throughput > 5.0 * points[0].throughput,
            "{all:?}"
        );
    }

    /// InnoDB with a 16 MiB buffer pool of 16 KiB pages over a table of
    /// 96 MiB asked for once an operation and two hot one-page tables,
    /// reading through 300 IOPS: the cache is found from the pool's misses
    /// (not from a cgroup's memory, which it has none of here); twice the
    /// pool misses less and is faster, half of it misses more and is
    /// slower, each within an interval that reaches what was measured (the
    /// change may not reach the cache), each named as the pool's size and
    /// none of them a memory limit.
    #[test]
    fn an_innodb_buffer_pool_is_the_cache_its_size_changes() {
        const MIB: f64 = 1048576.0;
        const PAGE: f64 = 16384.0;
        let relations = [
            ("accounts", 6144.0, 1.0),
            ("tellers", 1.0, 1.0),
            ("branches", 1.0, 1.0),
        ];
        let rel: Vec<Relation> = relations
            .iter()
            .map(|(n, pages, per_op)| rel(n, *pages, *per_op))
            .collect();
        let missed = misses(&rel, 900.0);
        assert!((0.8..0.9).contains(&missed), "{missed}");
        let mut points = reading(&relations, PAGE, missed);
        for p in &mut points {
            let ops = p.completed as f64;
            p.db.insert("buffer_pool_pages".to_string(), 1024.0);
            p.db.insert("page_bytes".to_string(), PAGE);
            p.db.insert("buffer_pool_reads".to_string(), missed * ops);
            p.db.insert("buffer_pool_read_requests".to_string(), 8.0 * ops);
        }
        let peak = 4;
        let r = reads(&points[peak]).expect("a buffer pool and a read limit");
        assert!(r.cache.pool);
        assert_eq!(r.cache.limit_bytes, 16.0 * MIB);
        assert_eq!(r.pages_per_s, 300.0);
        let found = r.cache.found.expect("a cache found from the misses");
        assert!((found / 900.0 - 1.0).abs() < 0.01, "{found}");
        let demands = crate::analyze::demands::demands(&points, true, Some(peak));
        let w = super::super::whatif::what_if(&points, &demands, &memory_short(), true, peak, None)
            .expect("predictions for the pool");
        let of = |mib: f64| {
            let words = format!("innodb_buffer_pool_size) of {mib:.1} MiB in place of 16.0 MiB");
            w.scenarios
                .iter()
                .find(|s| s.change.contains(&words))
                .unwrap_or_else(|| panic!("no {mib} MiB pool in {w:#?}"))
        };
        let measured = points[peak].throughput;
        let (half, twice) = (of(8.0), of(32.0));
        assert!(half.throughput < 0.97 * measured, "{half:?}");
        assert!(twice.throughput > 1.03 * measured, "{twice:?}");
        // The page cleaner may keep all of a change free: each interval
        // reaches the throughput measured with the pool as it was.
        for s in [half, twice] {
            let [lo, hi] = s.interval.expect("a rough figure, with its interval");
            assert!(lo <= measured && measured <= hi, "{s:?}");
        }
        assert!(
            w.scenarios.iter().all(|s| s.server_memory.is_none()),
            "a pool is no memory limit: {w:#?}"
        );
        let short = memory_short();
        let at = |m| super::super::whatif::at_memory(&points, &demands, &short, peak, m);
        assert!(
            at(Memory::Limit(32.0 * MIB)).is_none(),
            "a cgroup's memory limit does not size the pool"
        );
        let pool = at(Memory::Pool(32.0 * MIB)).expect("the pool's size, as a lab sets it");
        assert_eq!(pool.change, twice.change);
        // The evidence names the pool's size against the tables'.
        let said = crate::analyze::bottleneck::status::pool_evidence(&points[peak])
            .expect("a pool short of its tables");
        assert!(said.contains("buffer pool of 16.0 MiB"), "{said}");
        assert!(said.contains("its tables' 96.0 MiB"), "{said}");
    }

    /// A pool that read more pages per operation than its statistics'
    /// accesses (its upper levels lost, pages read ahead) gets no
    /// prediction, and the verdict says why in its figures, not that the
    /// statistics are missing.
    #[test]
    fn misses_past_the_accesses_say_why_no_prediction_is_made() {
        const PAGE: f64 = 16384.0;
        let relations = [("accounts", 1635.0, 1.0)];
        let mut points = reading(&relations, PAGE, 2.1);
        for p in &mut points {
            let ops = p.completed as f64;
            p.db.insert("buffer_pool_pages".to_string(), 507.0);
            p.db.insert("page_bytes".to_string(), PAGE);
            p.db.insert("buffer_pool_reads".to_string(), 2.1 * ops);
        }
        let peak = 4;
        let r = reads(&points[peak]).expect("a buffer pool and a read limit");
        assert!(r.cache.found.is_none(), "{:?}", r.cache);
        let demands = crate::analyze::demands::demands(&points, true, Some(peak));
        let short = memory_short();
        assert!(
            super::super::whatif::what_if(&points, &demands, &short, true, peak, None).is_none()
        );
        let why = super::super::whatif::not_predicted(&short, points.get(peak)).expect("a reason");
        for said in [
            "read 2.10 pages from storage per operation, more than the 1.00 accesses",
            "its buffer pool of 7.9 MiB",
            "innodb_lru_scan_depth",
        ] {
            assert!(why.contains(said), "{why}");
        }
        // Without a point, the general reason.
        let general = super::super::whatif::not_predicted(&short, None).expect("a reason");
        assert!(
            general.contains("it needs the server's statistics"),
            "{general}"
        );
    }
}
