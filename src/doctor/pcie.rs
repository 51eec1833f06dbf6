//! PCIe links trained below their capability: for every device, current
//! link speed and width against the maximum (/sys/bus/pci/devices) — the
//! slow card that drags a bus down, in today's form. Idle power saving
//! (ASPM) can lower the speed of an idle link; recheck under load.

use super::{shown, Finding, Report, Root, Severity};

/// `8.0 GT/s PCIe` → 8.0.
fn gts(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

pub(crate) fn check(root: &Root, report: &mut Report) {
    let devices = root.list("sys/bus/pci/devices");
    let mut any = false;
    for dev in devices {
        let base = format!("sys/bus/pci/devices/{dev}");
        let read = |f: &str| root.read(&format!("{base}/{f}"));
        let (Some(cur_s), Some(max_s)) = (read("current_link_speed"), read("max_link_speed"))
        else {
            continue;
        };
        any = true;
        let (cur_w, max_w) = (
            read("current_link_width").and_then(|w| w.parse::<u32>().ok()),
            read("max_link_width").and_then(|w| w.parse::<u32>().ok()),
        );
        let slow = gts(&cur_s).zip(gts(&max_s)).is_some_and(|(c, m)| c < m);
        let narrow = cur_w.zip(max_w).is_some_and(|(c, m)| c > 0 && c < m);
        if !(slow || narrow) {
            continue;
        }
        let class = read("class").unwrap_or_default();
        let what = match class.get(..4) {
            Some("0x02") => "network controller",
            Some("0x01") => "storage controller",
            Some("0x03") => "display controller",
            Some("0x06") => "bridge",
            _ => "device",
        };
        report.add(Finding {
            severity: Severity::Warning,
            area: "pcie".to_string(),
            title: format!(
                "{dev} ({what}) runs its PCIe link at {cur_s} x{} of a possible {max_s} x{}",
                cur_w.unwrap_or(0),
                max_w.unwrap_or(0)
            ),
            evidence: vec![
                shown(&format!("/{base}/current_link_speed"), &cur_s),
                shown(&format!("/{base}/max_link_speed"), &max_s),
                shown(&format!("/{base}/current_link_width"), cur_w.unwrap_or(0)),
                shown(&format!("/{base}/max_link_width"), max_w.unwrap_or(0)),
            ],
            why: "a link trained below its capability caps the device's bandwidth (a bus dragged down to one slow card halved a lab's throughput); an idle link may be slowed by power saving, so recheck under load".to_string(),
            fix: "reseat the card in a slot wired for its full width and generation, check the BIOS's PCIe settings, and compare again during a run".to_string(),
        });
    }
    if !any {
        report.missing("PCIe link speeds (no device reports current_link_speed)");
    }
}
