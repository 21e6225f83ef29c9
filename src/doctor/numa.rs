//! Each lane's NUMA node (its drive's controller, or for NVMe-oF the NIC its connection
//! leaves through) against each NVIDIA GPU's (`/sys/bus/pci/devices/<bdf>/numa_node`).

use serde_json::json;

use super::block::DevReport;
use super::sysroot::SysRoot;
use super::{Check, Status};

/// A GPU on the PCI bus and its NUMA node.
pub(super) struct Gpu {
    pub pci: String,
    pub numa: Option<i32>,
}

/// The NVIDIA GPUs on the PCI bus under `root`.
pub(super) fn gpus(root: &SysRoot) -> Vec<Gpu> {
    root.nvidia_gpus()
        .into_iter()
        .map(|pci| Gpu {
            numa: root.pci_numa_node(&pci),
            pci,
        })
        .collect()
}

/// Network interfaces on NUMA node `node`, for the fix of a far fabric lane.
fn nics_on(root: &SysRoot, node: i32) -> Vec<String> {
    root.list("/sys/class/net")
        .into_iter()
        .filter(|i| {
            root.canonical(&format!("/sys/class/net/{i}"))
                .and_then(|d| super::sysroot::pci_function_of(&d))
                .and_then(|p| root.pci_numa_node(&p))
                == Some(node)
        })
        .collect()
}

/// `numa.LANE`: the lane's devices (`devs`: the reports of the devices under it) against
/// every GPU.
pub(super) fn lane_check(root: &SysRoot, lane: &str, devs: &[&DevReport], gpus: &[Gpu]) -> Check {
    let name = format!("numa.{lane}");
    let placed: Vec<(&DevReport, i32)> = devs
        .iter()
        .filter_map(|d| d.numa.map(|n| (*d, n)))
        .collect();
    let dev_json: Vec<serde_json::Value> = devs
        .iter()
        .filter(|d| d.numa_from.is_some())
        .map(|d| json!({"device": d.dev.name, "numa_node": d.numa, "through": d.numa_from}))
        .collect();
    let gpu_json: Vec<serde_json::Value> = gpus
        .iter()
        .map(|g| {
            json!({"pci": g.pci, "numa_node": g.numa,
            "same_node": g.numa.map(|n| placed.iter().any(|p| p.1 == n))})
        })
        .collect();
    let facts = |c: Check| {
        c.fact("devices", dev_json.clone())
            .fact("gpus", gpu_json.clone())
    };
    if gpus.is_empty() {
        return facts(Check::new(
            name,
            Status::Skip,
            format!("no NVIDIA GPU on the PCI bus: nothing to place {lane} against"),
        ));
    }
    let nodes = root.numa_nodes().len();
    if placed.is_empty() {
        let why = if nodes <= 1 {
            "one NUMA node (or none in sysfs): lanes and GPUs share it"
        } else {
            "its devices' NUMA node is unknown (-1, or not a PCI device): cannot compare"
        };
        let status = if nodes <= 1 { Status::Ok } else { Status::Skip };
        return facts(Check::new(name, status, format!("{lane}: {why}")));
    }
    let mut lines: Vec<String> = placed
        .iter()
        .map(|(d, n)| {
            format!(
                "{lane} on {} through {}: NUMA node {n}",
                d.dev.name,
                d.numa_from.as_deref().unwrap_or("its controller")
            )
        })
        .collect();
    let mut near = 0;
    for g in gpus {
        let same = g.numa.map(|n| placed.iter().any(|p| p.1 == n));
        lines.push(match (g.numa, same) {
            (Some(n), Some(true)) => {
                near += 1;
                format!("GPU {} on NUMA node {n}: the same node", g.pci)
            }
            (Some(n), _) => format!(
                "GPU {} on NUMA node {n}: reads to it cross the socket link",
                g.pci
            ),
            (None, _) => format!("GPU {}: NUMA node unknown", g.pci),
        });
    }
    let mut c = Check::new(name, Status::Ok, lines.join("\n"));
    if near == 0 && gpus.iter().any(|g| g.numa.is_some()) {
        let node = gpus.iter().find_map(|g| g.numa).unwrap_or(0);
        c.status = Status::Warn;
        c.detail +=
            &format!("\nno GPU on {lane}'s node: every frame crosses the inter-socket link");
        let fabric = devs
            .iter()
            .flat_map(|d| &d.controllers)
            .any(|c| c.nic.is_some());
        let fix = if fabric {
            let nics = nics_on(root, node);
            let nic = nics
                .first()
                .map_or("a NIC on that node".to_string(), |n| n.clone());
            format!(
                "connect the namespace through {nic} (NUMA node {node}, the GPU's): nvme connect ... --host-iface={nic}; or run supercell under numactl --cpunodebind={node} --membind={node}"
            )
        } else {
            format!(
                "put {lane} on a drive attached to NUMA node {node} (the GPU's), or run supercell under numactl --cpunodebind={node} --membind={node} so its buffers sit by the GPU"
            )
        };
        c = c.fix(fix);
    }
    facts(c)
}
