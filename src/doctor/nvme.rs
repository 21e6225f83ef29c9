//! NVMe namespaces: their controllers (several where native multipath is on), each
//! controller's transport (`pcie`, `rdma`, `tcp`, `fc`, `loop`), and for fabrics the NIC
//! the connection leaves through (`host_iface=` in its address, else the IPv4 route to
//! `traddr` in `/proc/net/route`) with that NIC's NUMA node.

use std::net::Ipv4Addr;
use std::path::Path;

use serde_json::{Value, json};

use super::Finding;
use super::sysroot::{SysRoot, is_pci_address, list_dir, name_of, pci_function_of};

/// The NIC a fabric connection leaves through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Nic {
    pub iface: String,
    pub pci: Option<String>,
    pub numa: Option<i32>,
    /// How it was found ("host_iface", "route to 10.0.0.2").
    pub how: String,
}

/// One NVMe controller of a namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Controller {
    pub name: String,
    /// `pcie`, `rdma`, `tcp`, `fc`, `loop`; `None` where the kernel has no `transport`.
    pub transport: Option<String>,
    /// `address` (fabrics: `traddr=...,trsvcid=...`; PCIe: the PCI function).
    pub address: Option<String>,
    /// The PCI function of a PCIe controller.
    pub pci: Option<String>,
    /// The controller's own `numa_node` (where the kernel gives one).
    pub numa_attr: Option<i32>,
    /// The NUMA node of its PCI function (PCIe).
    pub pci_numa: Option<i32>,
    pub nic: Option<Nic>,
}

/// Whether `s` names a controller (`nvme0`), not a namespace or subsystem.
fn is_controller_name(s: &str) -> bool {
    s.strip_prefix("nvme")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The controllers of the namespace at `disk_dir` (sysfs), sorted, each once.
pub(super) fn controllers_of(root: &SysRoot, disk_dir: &Path, name: &str) -> Vec<Controller> {
    let mut names: Vec<String> = Vec::new();
    // Native multipath: the head's paths (nvme0c0n1, ...) live under their controllers.
    for p in list_dir(&disk_dir.join("multipath")) {
        if let Some(path_dir) = root.resolve(&disk_dir.join("multipath").join(&p))
            && let Some(parent) = path_dir.parent()
            && is_controller_name(&name_of(parent))
        {
            names.push(name_of(parent));
        }
    }
    if names.is_empty()
        && let Some(parent) = disk_dir.parent()
        && is_controller_name(&name_of(parent))
    {
        names.push(name_of(parent));
    }
    if names.is_empty()
        && let Some(dev) = root.resolve(&disk_dir.join("device"))
    {
        let n = name_of(&dev);
        if is_controller_name(&n) {
            names.push(n);
        } else if n.starts_with("nvme-subsys") {
            names.extend(list_dir(&dev).into_iter().filter(|c| is_controller_name(c)));
        }
    }
    if names.is_empty() {
        // nvme0n1 → nvme0, where that controller exists.
        let ctrl: String = name
            .chars()
            .skip(4)
            .take_while(|c| c.is_ascii_digit())
            .collect();
        let ctrl = format!("nvme{ctrl}");
        if is_controller_name(&ctrl) && root.path(&format!("/sys/class/nvme/{ctrl}")).exists() {
            names.push(ctrl);
        }
    }
    names.sort();
    names.dedup();
    names.iter().map(|n| controller(root, n)).collect()
}

fn controller(root: &SysRoot, name: &str) -> Controller {
    let at = |f: &str| root.read(&format!("/sys/class/nvme/{name}/{f}"));
    let transport = at("transport");
    let address = at("address");
    let pci = root
        .canonical(&format!("/sys/class/nvme/{name}/device"))
        .map(|d| name_of(&d))
        .filter(|d| is_pci_address(d))
        .or_else(|| {
            (transport.as_deref() == Some("pcie"))
                .then(|| root.canonical(&format!("/sys/class/nvme/{name}")))
                .flatten()
                .and_then(|d| pci_function_of(&d))
        });
    let fabric = matches!(transport.as_deref(), Some("rdma" | "tcp"));
    let nic = if fabric {
        address.as_deref().and_then(|a| fabric_nic(root, a))
    } else {
        None
    };
    Controller {
        name: name.to_string(),
        pci_numa: pci.as_deref().and_then(|p| root.pci_numa_node(p)),
        numa_attr: at("numa_node")
            .and_then(|s| s.parse().ok())
            .filter(|n: &i32| *n >= 0),
        transport,
        address,
        pci,
        nic,
    }
}

/// One `key=value` of a fabric controller's address.
fn address_field<'a>(address: &'a str, key: &str) -> Option<&'a str> {
    address
        .split(',')
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.trim())
}

/// The NIC a fabric connection to `address` leaves through.
fn fabric_nic(root: &SysRoot, address: &str) -> Option<Nic> {
    let (iface, how) = match address_field(address, "host_iface") {
        Some(i) => (i.to_string(), "host_iface in its address".to_string()),
        None => {
            let traddr: Ipv4Addr = address_field(address, "traddr")?.parse().ok()?;
            let route = std::fs::read_to_string(root.path("/proc/net/route")).ok()?;
            (
                route_iface(&route, traddr)?,
                format!("the route to {traddr}"),
            )
        }
    };
    let pci = nic_pci(root, &iface, 0);
    Some(Nic {
        numa: pci.as_deref().and_then(|p| root.pci_numa_node(p)),
        iface,
        pci,
        how,
    })
}

/// The interface of the most specific IPv4 route to `to` in `/proc/net/route` text.
pub(super) fn route_iface(table: &str, to: Ipv4Addr) -> Option<String> {
    let ip = u32::from_le_bytes(to.octets());
    let mut best: Option<(u32, u32, String)> = None;
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let hex = |s: &str| u32::from_str_radix(s, 16).ok();
        let (Some(dest), Some(mask), Ok(metric)) = (hex(f[1]), hex(f[7]), f[6].parse::<u32>())
        else {
            continue;
        };
        if ip & mask != dest & mask {
            continue;
        }
        let better = best.as_ref().is_none_or(|(m, met, _)| {
            mask.count_ones() > m.count_ones()
                || (mask.count_ones() == m.count_ones() && metric < *met)
        });
        if better {
            best = Some((mask, metric, f[0].to_string()));
        }
    }
    best.map(|b| b.2)
}

/// The PCI function of a network interface; a bond or VLAN's first lower device's.
fn nic_pci(root: &SysRoot, iface: &str, depth: u32) -> Option<String> {
    let dir = root.canonical(&format!("/sys/class/net/{iface}"))?;
    if let Some(p) = pci_function_of(&dir) {
        return Some(p);
    }
    if depth > 3 {
        return None;
    }
    list_dir(&dir)
        .iter()
        .filter_map(|e| e.strip_prefix("lower_"))
        .find_map(|lower| nic_pci(root, lower, depth + 1))
}

impl Controller {
    fn is_fabric(&self) -> bool {
        matches!(self.transport.as_deref(), Some("rdma" | "tcp" | "fc"))
    }

    /// The NUMA node reads come through, and from what.
    pub(super) fn numa_node(&self) -> Option<(i32, String)> {
        if let Some(nic) = &self.nic
            && let Some(n) = nic.numa
        {
            return Some((n, format!("{}'s NIC {}", self.name, nic.iface)));
        }
        if let (Some(n), Some(pci)) = (self.pci_numa, &self.pci) {
            return Some((n, format!("controller {} at {pci}", self.name)));
        }
        self.numa_attr
            .map(|n| (n, format!("controller {}", self.name)))
    }

    /// The PCI function whose interrupts complete this controller's reads (the drive's,
    /// or the NIC's for fabrics), its owner in words, and whether those are NVMe queue
    /// vectors (kernel-managed).
    pub(super) fn interrupt_source(&self) -> Option<(String, String, bool)> {
        if self.is_fabric() {
            let nic = self.nic.as_ref()?;
            let pci = nic.pci.clone()?;
            let owner = format!("{}'s NIC {} ({pci})", self.name, nic.iface);
            return Some((pci, owner, false));
        }
        let pci = self.pci.clone()?;
        let owner = format!("{} ({pci})", self.name);
        Some((pci, owner, true))
    }

    pub(super) fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "transport": self.transport,
            "address": self.address,
            "pci": self.pci,
            "numa_node": self.numa_node().map(|n| n.0),
            "nic": self.nic.as_ref().map(|n| json!({
                "iface": n.iface, "pci": n.pci, "numa_node": n.numa, "found_by": n.how,
            })),
        })
    }
}

/// The transport of a namespace's controllers, in words.
pub(super) fn transport_finding(ctrls: &[Controller]) -> Finding {
    let set = "transport";
    if ctrls.is_empty() {
        return Finding::unknown(set, "no controller found for the namespace in sysfs");
    }
    let value: Vec<String> = ctrls
        .iter()
        .map(|c| format!("{} {}", c.name, c.transport.as_deref().unwrap_or("unknown")))
        .collect();
    let notes: Vec<String> = ctrls.iter().map(transport_note).collect();
    if ctrls.iter().all(|c| c.transport.is_none()) {
        return Finding::unknown(set, "no transport file (kernel before NVMe-oF)");
    }
    Finding::ok(set, value.join(", "), notes.join("; "))
}

fn transport_note(c: &Controller) -> String {
    let via = |c: &Controller| match &c.nic {
        Some(n) => format!(" through {} (found by {})", n.iface, n.how),
        None => String::new(),
    };
    let to = c
        .address
        .as_deref()
        .and_then(|a| address_field(a, "traddr"))
        .map_or(String::new(), |t| format!(" to {t}"));
    match c.transport.as_deref() {
        Some("pcie") => format!(
            "{}: a local PCIe drive{}",
            c.name,
            c.pci
                .as_deref()
                .map_or(String::new(), |p| format!(" at {p}"))
        ),
        Some("rdma") => format!(
            "{}: NVMe over RDMA{to}{}: the NIC's DMA places the data",
            c.name,
            via(c)
        ),
        Some("tcp") => format!(
            "{}: NVMe over TCP{to}{}: each read costs host CPU (copy, digest) in the network stack",
            c.name,
            via(c)
        ),
        Some("fc") => format!("{}: NVMe over Fibre Channel{to}", c.name),
        Some("loop") => format!(
            "{}: the nvme-loop target: the device behind it sets the speed",
            c.name
        ),
        Some(t) => format!("{}: transport {t}", c.name),
        None => format!("{}: transport unknown", c.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_specific_route_wins() {
        let table = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
            eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
            ib0\t0000000A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
            ens1\t0001000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(
            route_iface(table, "10.0.1.7".parse().unwrap()).as_deref(),
            Some("ens1")
        );
        assert_eq!(
            route_iface(table, "10.0.9.7".parse().unwrap()).as_deref(),
            Some("ib0")
        );
        assert_eq!(
            route_iface(table, "8.8.8.8".parse().unwrap()).as_deref(),
            Some("eth0")
        );
        assert_eq!(route_iface("junk", "8.8.8.8".parse().unwrap()), None);
    }

    #[test]
    fn addresses_split_into_fields() {
        let a = "traddr=10.0.0.2,trsvcid=4420,src_addr=10.0.0.1,host_iface=ens1";
        assert_eq!(address_field(a, "traddr"), Some("10.0.0.2"));
        assert_eq!(address_field(a, "host_iface"), Some("ens1"));
        assert_eq!(address_field(a, "nope"), None);
        assert!(is_controller_name("nvme12"));
        assert!(!is_controller_name("nvme0n1") && !is_controller_name("nvme-subsys0"));
    }
}
