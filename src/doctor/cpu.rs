//! The CPU side of reads: the frequency governor (`performance` is what fio and gdsio
//! figures are taken at) and where a device's interrupts land (`/proc/interrupts`,
//! `/proc/irq/N/effective_affinity_list` or `smp_affinity_list`): every queue's vector on
//! one CPU, or none on the device's NUMA node, costs completions.

use std::collections::{BTreeMap, BTreeSet};

use super::sysroot::{SysRoot, cpu_list, parse_cpu_list};
use super::{Check, Finding, Status};

/// The frequency governor of every CPU with cpufreq.
pub(super) fn governor_check(root: &SysRoot) -> Check {
    let mut by_governor: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for entry in root.list("/sys/devices/system/cpu") {
        let Some(n) = entry
            .strip_prefix("cpu")
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(g) = root.read(&format!(
            "/sys/devices/system/cpu/{entry}/cpufreq/scaling_governor"
        )) {
            by_governor.entry(g).or_default().insert(n);
        }
    }
    let driver = root.read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_driver");
    let facts = |c: Check| {
        let governors: serde_json::Map<String, serde_json::Value> = by_governor
            .iter()
            .map(|(g, cpus)| (g.clone(), cpu_list(cpus).into()))
            .collect();
        c.fact("governors", governors)
            .fact("driver", driver.clone())
    };
    if by_governor.is_empty() {
        return facts(Check::new(
            "cpu.governor",
            Status::Skip,
            "no cpufreq governor in sysfs (a VM, or the firmware sets the clock): nothing to set here",
        ));
    }
    let driver_text = driver
        .as_deref()
        .map_or(String::new(), |d| format!(" (driver {d})"));
    let lines: Vec<String> = by_governor
        .iter()
        .map(|(g, cpus)| format!("{g} on CPUs {}", cpu_list(cpus)))
        .collect();
    let detail = format!("{}{driver_text}", lines.join(", "));
    if by_governor.len() == 1 && by_governor.contains_key("performance") {
        return facts(Check::new("cpu.governor", Status::Ok, detail));
    }
    let available = root
        .read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_available_governors")
        .unwrap_or_default();
    let mut fix = "sudo cpupower frequency-set -g performance (or: echo performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)".to_string();
    if !available.is_empty() && !available.split_whitespace().any(|g| g == "performance") {
        fix = format!(
            "the driver offers only \"{available}\": set performance in the firmware (BIOS power profile), or boot with another cpufreq driver"
        );
    }
    facts(
        Check::new(
            "cpu.governor",
            Status::Warn,
            format!("{detail}: the clock drops between reads, adding wake-up and ramp time to completions (fio and gdsio figures are taken at performance)"),
        )
        .fix(fix),
    )
}

/// One line of `/proc/interrupts`: the IRQ number and its name (the last word).
fn interrupt_names(text: &str) -> BTreeMap<u32, (String, String)> {
    text.lines()
        .filter_map(|l| {
            let (irq, rest) = l.trim_start().split_once(':')?;
            let irq: u32 = irq.trim().parse().ok()?;
            let name = rest.split_whitespace().last()?.to_string();
            Some((irq, (name, rest.to_string())))
        })
        .collect()
}

/// The online CPUs.
fn online_cpus(root: &SysRoot, interrupts: &str) -> BTreeSet<u32> {
    if let Some(s) = root
        .read("/sys/devices/system/cpu/online")
        .and_then(|s| parse_cpu_list(&s))
    {
        return s;
    }
    // Older trees: the CPU columns of /proc/interrupts.
    interrupts
        .lines()
        .next()
        .map(|h| {
            h.split_whitespace()
                .filter_map(|w| w.strip_prefix("CPU")?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether an interrupt vector completes reads (not an admin or config one).
fn is_io_vector(name: &str) -> bool {
    let nvme_admin = name.starts_with("nvme") && name.ends_with("q0");
    !(nvme_admin || name.ends_with("-config") || name.contains("async"))
}

/// The IRQs of a PCI function: `msi_irqs/`, else `/proc/interrupts` lines naming it,
/// else its legacy `irq`.
fn irqs_of(root: &SysRoot, pci: &str, names: &BTreeMap<u32, (String, String)>) -> Vec<u32> {
    let mut irqs: Vec<u32> = root
        .list(&format!("/sys/bus/pci/devices/{pci}/msi_irqs"))
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    if irqs.is_empty() {
        irqs = names
            .iter()
            .filter(|(_, (_, rest))| rest.contains(pci))
            .map(|(n, _)| *n)
            .collect();
    }
    if irqs.is_empty()
        && let Some(n) = root
            .read(&format!("/sys/bus/pci/devices/{pci}/irq"))
            .and_then(|s| s.parse::<u32>().ok())
            .filter(|n| *n > 0)
    {
        irqs.push(n);
    }
    irqs.sort_unstable();
    irqs
}

/// Where the interrupts of the PCI function `pci` (owned by `owner`, in words) land,
/// judged against the online CPUs and the device's NUMA node. `managed`: NVMe queue
/// vectors, whose affinity the kernel sets (and may refuse to change).
pub(super) fn irq_finding(
    root: &SysRoot,
    pci: &str,
    owner: &str,
    numa: Option<i32>,
    managed: bool,
) -> Finding {
    let set = "irq_affinity";
    let interrupts = root.read("/proc/interrupts").unwrap_or_default();
    let names = interrupt_names(&interrupts);
    let all = irqs_of(root, pci, &names);
    let io: Vec<u32> = {
        let io: Vec<u32> = all
            .iter()
            .copied()
            .filter(|n| names.get(n).is_none_or(|(name, _)| is_io_vector(name)))
            .collect();
        if io.is_empty() { all.clone() } else { io }
    };
    let mut used = BTreeSet::new();
    let mut known = Vec::new();
    for n in &io {
        let read = |f: &str| {
            root.read(&format!("/proc/irq/{n}/{f}"))
                .and_then(|s| parse_cpu_list(&s))
                .filter(|s| !s.is_empty())
        };
        if let Some(cpus) = read("effective_affinity_list").or_else(|| read("smp_affinity_list")) {
            used.extend(cpus.iter().copied());
            known.push(*n);
        }
    }
    if known.is_empty() {
        return Finding::unknown(
            set,
            format!(
                "no interrupt affinity found for {owner} (no msi_irqs, no /proc/irq/N/smp_affinity_list)"
            ),
        );
    }
    let online = online_cpus(root, &interrupts);
    let value = format!("{} I/O vector(s) on CPUs {}", known.len(), cpu_list(&used));
    let irq_words: Vec<String> = known.iter().map(u32::to_string).collect();
    let managed_note = if managed {
        " (NVMe queue vectors are kernel-managed: where the kernel refuses the write, look for isolcpus= or irqaffinity= in /proc/cmdline)"
    } else {
        " (stop irqbalance or ban these IRQs in it first, or it moves them back)"
    };
    if known.len() >= 2 && used.len() == 1 && online.len() > 1 {
        let cpu = used.iter().next().copied().unwrap_or(0);
        return Finding::warn(
            set,
            value,
            format!(
                "every I/O vector of {owner} on CPU {cpu}: completions of all queues run on one core, which caps IOPS and steals that core"
            ),
            format!(
                "c=0; for n in {}; do echo $c | sudo tee /proc/irq/$n/smp_affinity_list; c=$(( (c+1) % {} )); done{managed_note}",
                irq_words.join(" "),
                online.len()
            ),
        );
    }
    let node_cpus = numa.and_then(|n| root.numa_nodes().into_iter().find(|(id, _)| *id == n));
    if let Some((node, cpus)) = node_cpus
        && !cpus.is_empty()
        && used.is_disjoint(&cpus)
        && root.numa_nodes().len() > 1
    {
        return Finding::warn(
            set,
            value,
            format!(
                "{owner} is on NUMA node {node}, its interrupts on CPUs of another node: every completion crosses the socket link"
            ),
            format!(
                "for n in {}; do echo {} | sudo tee /proc/irq/$n/smp_affinity_list; done{managed_note}",
                irq_words.join(" "),
                cpu_list(&cpus)
            ),
        );
    }
    let note = if known.len() == 1 {
        format!("{owner} has one I/O vector")
    } else {
        format!("{owner}'s vectors spread over {} CPUs", used.len())
    };
    Finding::ok(set, value, note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupt_lines_give_numbers_and_names() {
        let t = "           CPU0       CPU1\n 36:   0  2263701 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\nNMI:  0 0 Non-maskable interrupts\n";
        let n = interrupt_names(t);
        assert_eq!(n.len(), 1);
        assert_eq!(n[&36].0, "virtio1-req.0");
        assert!(n[&36].1.contains("0000:00:02.0"));
        assert!(is_io_vector("nvme0q1") && !is_io_vector("nvme0q0"));
        assert!(!is_io_vector("virtio1-config") && is_io_vector("virtio1-req.0"));
    }
}
