//! Tests of the fio job reader: jobs mapped onto access specs, each
//! refusal placed on its line, and arbitrary text never making it panic.

use super::*;
use proptest::prelude::*;

fn job(text: &str) -> FioJob {
    read(text, "t.fio", None).unwrap_or_else(|e| panic!("{e:?}"))
}

fn refused(text: &str, wanted: Option<&str>) -> JobError {
    read(text, "t.fio", wanted).expect_err("refused")
}

#[test]
fn a_random_mix_with_a_bssplit_is_one_line_per_size() {
    let j = job("; a mix\n[global]\nioengine=libaio\ndirect=1\niodepth=32\nsize=64m\n\n# the job\n[mix]\nrw=randrw\nrwmixread=70\nbssplit=4k/50:64k/50\nruntime=30\ntime_based\ndescription=70/30 random\n");
    assert_eq!(j.name, "mix");
    assert_eq!(j.section, "mix");
    assert_eq!(j.description.as_deref(), Some("70/30 random"));
    assert_eq!((j.iodepth, j.numjobs, j.outstanding), (32, 1, 32));
    assert_eq!(j.size, Some(64 << 20));
    assert!(j.direct && j.time_based);
    assert_eq!(j.engine, Some(Engine::Uring));
    assert_eq!(j.runtime, Some(Duration::from_secs(30)));
    let lines = &j.spec.lines;
    assert_eq!(lines.len(), 2);
    assert_eq!((lines[0].size, lines[1].size), (4096, 65536));
    assert!(lines
        .iter()
        .all(|l| l.share == 50.0 && l.read == 70.0 && l.random == 100.0));
    // fio aligns to the smallest block size.
    assert!(lines.iter().all(|l| l.align == 4096));
}

#[test]
fn norandommap_is_taken_and_a_mix_without_it_says_how_fio_differs() {
    let with_map = job("[mix]\nrw=randrw\nbssplit=4k/50:64k/50\n");
    assert!(!with_map.norandommap);
    assert!(with_map.summary().contains("norandommap"));
    for flag in ["norandommap", "norandommap=1"] {
        let j = job(&format!("[mix]\nrw=randrw\nbssplit=4k/50:64k/50\n{flag}\n"));
        assert!(j.norandommap, "{flag}");
        assert!(!j.summary().contains("norandommap"), "{flag}");
    }
    // One size, or sequential I/O: fio's map shortens nothing.
    assert!(!job("[j]\nrw=randread\n").summary().contains("norandommap"));
    assert!(!job("[j]\nrw=rw\nbssplit=4k/50:64k/50\n")
        .summary()
        .contains("norandommap"));
}

#[test]
fn each_pattern_maps_to_its_read_and_random_shares() {
    for (rw, read, random) in [
        ("read", 100.0, 0.0),
        ("write", 0.0, 0.0),
        ("randread", 100.0, 100.0),
        ("randwrite", 0.0, 100.0),
        ("rw", 50.0, 0.0),
        ("readwrite", 50.0, 0.0),
        ("randrw", 50.0, 100.0),
    ] {
        let j = job(&format!("[j]\nrw={rw}\n"));
        let l = &j.spec.lines[0];
        assert_eq!((l.read, l.random, l.size), (read, random, 4096), "{rw}");
    }
    let j = job("[j]\nreadwrite=randrw\nrwmixwrite=20\n");
    assert_eq!(j.spec.lines[0].read, 80.0);
    // fio's default pattern is a sequential read.
    assert_eq!(job("[j]\n").spec.lines[0].random, 0.0);
}

#[test]
fn sections_globals_and_options_combine_as_fio_reads_them() {
    let text = "[global]\nbs=8k\n[a]\nrw=read\n[global]\nbs=16k\n[b]\nrw=write\nname=writer\nnumjobs=4\niodepth=8\nrate_iops=250\nthinktime=500\n";
    let a = read(text, "t.fio", Some("a")).unwrap();
    assert_eq!(a.spec.lines[0].size, 8192);
    let b = read(text, "t.fio", Some("b")).unwrap();
    assert_eq!(b.spec.lines[0].size, 16384);
    assert_eq!(b.name, "writer");
    assert_eq!(b.spec.name, "writer");
    assert_eq!((b.outstanding, b.rate_iops), (32, Some(1000)));
    assert_eq!(b.spec.lines[0].delay, Duration::from_micros(500));
    // A bsrange is its multiples of the low size, in equal shares.
    let r = job("[j]\nbsrange=4k-16k\n");
    let sizes: Vec<u64> = r.spec.lines.iter().map(|l| l.size).collect();
    assert_eq!(sizes, [4096, 8192, 12288, 16384]);
    assert!(r.spec.lines.iter().all(|l| l.share == 25.0));
    // A split entry without a share takes what the others leave.
    let s = job("[j]\nbssplit=4k/60:8k:16k\n");
    let shares: Vec<f64> = s.spec.lines.iter().map(|l| l.share).collect();
    assert_eq!(shares, [60.0, 20.0, 20.0]);
    assert_eq!(
        job("[j]\nfilename=/tmp/x.bin\n").filename.as_deref(),
        Some("/tmp/x.bin")
    );
    assert!(job("[j]\noffset=0\ndirect=0\nioengine=psync\n").engine == Some(Engine::Psync));
}

#[test]
fn sizes_and_times_read_as_fio_reads_them() {
    for (text, bytes) in [
        ("4096", Some(4096)),
        ("4k", Some(4096)),
        ("4K", Some(4096)),
        ("4KiB", Some(4096)),
        ("4kb", Some(4096)),
        ("1m", Some(1 << 20)),
        ("2g", Some(2 << 30)),
        ("1t", Some(1 << 40)),
        ("16383p", Some(16383 << 50)),
        ("16384p", None),
        ("99999999999999999999g", None),
        ("4x", None),
        ("k", None),
        ("4ib", None),
        ("-4k", None),
        ("4.5k", None),
        ("", None),
    ] {
        assert_eq!(size(text), bytes, "{text}");
    }
    let t = |v: &str, unit| time("runtime", v, unit);
    assert_eq!(t("30", Duration::from_secs(1)), Ok(Duration::from_secs(30)));
    assert_eq!(
        t("2m", Duration::from_secs(1)),
        Ok(Duration::from_secs(120))
    );
    assert_eq!(
        t("10", Duration::from_micros(1)),
        Ok(Duration::from_micros(10))
    );
    assert!(t("4294967295d", Duration::from_secs(1)).is_err());
    assert!(t("2d", Duration::from_secs(1)).is_err());
    assert!(t("1.5s", Duration::from_secs(1)).is_err());
}

#[test]
fn what_is_not_run_is_refused_on_its_line() {
    for (text, line, says) in [
        (
            "[j]\nrw=randread\nverify=crc32c\n",
            3,
            "the option 'verify' is not one perflab runs",
        ),
        ("[j]\nrw=trim\n", 2, "rw=trim: perflab runs read"),
        ("[j]\nrw=randread:8\n", 2, "offset modifier"),
        ("[j]\nbs=4q\n", 2, "bs=4q: not a size"),
        ("[j]\nbs=99999999999999999999g\n", 2, "not a size"),
        ("[j]\nbs=4k,8k\n", 2, "separate read and write"),
        ("[j]\nbs=512m\n", 2, "above the largest transfer"),
        ("[j]\nsize=0\n", 2, "moves nothing"),
        ("[j]\nbssplit=4k/50:8k/40\n", 2, "sum to 90"),
        ("[j]\nbssplit=4k/70:8k/70\n", 2, "sum to 140"),
        ("[j]\nbsrange=512-1m\n", 2, "2048 sizes"),
        ("[j]\nbsrange=8k-4k\n", 2, "above the high one"),
        ("[j]\nioengine=mmap\n", 2, "ioengine=mmap"),
        ("[j]\nfilename=a:b\n", 2, "several files"),
        ("[j]\noffset=1m\n", 2, "region inside the file"),
        ("[j]\niodepth=0\n", 2, "iodepth=0: not a count"),
        (
            "[j]\nrate_iops=100,50\n",
            2,
            "separate read and write rates",
        ),
        ("[j]\nrw\n", 2, "rw needs a value"),
        ("[j]\ndirect=yes\n", 2, "give 0 or 1"),
        (
            "[j]\nrwmixread=70\nrwmixwrite=40\nrw=randrw\n",
            3,
            "do not sum to 100",
        ),
        ("[j]\nfilename=${HOME}/x\n", 2, "environment variables"),
        ("bs=4k\n[j]\n", 1, "before any [section]"),
        ("[j\n", 1, "not a [section] line"),
        ("[j]\n[j]\n", 2, "given twice"),
        ("[global]\nbs=4k\n", 1, "no job section"),
        ("[a]\n\n[b]\n", 3, "choose one with --section NAME"),
        (
            "[j]\niodepth=1000000\nnumjobs=2\n",
            1,
            "iodepth 1000000 × numjobs 2",
        ),
    ] {
        let e = refused(text, None);
        assert_eq!(e.line, line, "{text}: {e:?}");
        assert!(e.message.contains(says), "{text}: {}", e.message);
        assert!(!e.message.contains('\n'), "{text}: {}", e.message);
    }
    let e = refused("[a]\n[b]\n", Some("c"));
    assert!(
        e.message
            .contains("no section [c]; its job sections are: a, b"),
        "{}",
        e.message
    );
}

/// Option lines of a job: keys perflab reads and others, values of every kind.
fn job_text() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        4 => prop::sample::select(vec![
            "rw", "rwmixread", "rwmixwrite", "bs", "bssplit", "bsrange", "iodepth", "size",
            "filename", "direct", "numjobs", "offset", "rate_iops", "thinktime", "time_based",
            "runtime", "norandommap", "ioengine", "name", "description",
        ])
        .prop_map(str::to_string),
        1 => "[a-z_]{1,10}",
    ];
    let value = prop_oneof![
        3 => "[0-9]{1,22}(k|m|g|t|p|KiB|ib|b|s|ms|us|d)?",
        2 => "[0-9]{1,6}[kmg]?/[0-9]{0,3}(:[0-9]{1,6}[kmg]?/[0-9]{0,3}){0,4}",
        1 => "[0-9]{1,6}[kmg]?-[0-9]{1,6}[kmg]?",
        1 => prop::sample::select(vec!["randrw", "read", "trim", "libaio", "mmap", "0", "1"])
            .prop_map(str::to_string),
        1 => any::<String>(),
    ];
    let line = prop_oneof![
        6 => (key, prop::option::of(value)).prop_map(|(k, v)| match v {
            Some(v) => format!("{k}={v}"),
            None => k,
        }),
        1 => "\\[[a-z]{0,4}\\]?",
        1 => any::<String>(),
    ];
    prop::collection::vec(line, 0..12).prop_map(|l| format!("[j]\n{}", l.join("\n")))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Any text is a job or a one-line refusal on a line of the file;
    /// a job's shares sum to 100 and its sizes lie in 1..=MAX_TRANSFER.
    #[test]
    fn any_text_is_a_job_or_one_placed_line(text in job_text()) {
        match read(&text, "t.fio", None) {
            Ok(j) => {
                let sum: f64 = j.spec.lines.iter().map(|l| l.share).sum();
                prop_assert!((sum - 100.0).abs() < 0.02, "{sum}");
                prop_assert!(j.spec.lines.iter().all(|l| (1..=MAX_TRANSFER).contains(&l.size)));
                prop_assert!(j.outstanding >= 1);
            }
            Err(e) => {
                prop_assert!(e.line >= 1 && e.line <= text.lines().count().max(1), "{e:?}");
                prop_assert!(!e.message.contains('\n'), "{e:?}");
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(text in any::<String>(), wanted in prop::option::of("[a-z]{1,3}")) {
        let _ = read(&text, "t.fio", wanted.as_deref());
    }
}
