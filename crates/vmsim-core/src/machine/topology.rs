//! Sockets, cores, SMT threads and NUMA nodes, numbered as Linux numbers
//! them on Intel and AMD servers: the first hardware thread of every core
//! comes first (socket by socket), then the SMT siblings in the same order.
//!
//! Invariant: `cpu -> (socket, core, thread)` is a bijection onto the grid.

use serde::Serialize;

pub const MAX_CPUS: usize = 256;

#[derive(Clone, Debug, Serialize)]
pub struct Topology {
    pub sockets: usize,
    pub cores_per_socket: usize,
    pub threads_per_core: usize,
    pub nodes_per_socket: usize,
    /// LLC instances per socket (CCXs on AMD Zen; 1 on Intel).
    pub llc_per_socket: usize,
}

impl Topology {
    pub fn nr_cpus(&self) -> usize {
        self.sockets * self.cores_per_socket * self.threads_per_core
    }
    pub fn nr_cores(&self) -> usize {
        self.sockets * self.cores_per_socket
    }
    pub fn nr_nodes(&self) -> usize {
        self.sockets * self.nodes_per_socket
    }
    pub fn nr_llcs(&self) -> usize {
        self.sockets * self.llc_per_socket
    }
    /// Global core index (0..nr_cores) a hardware thread runs on.
    #[inline]
    pub fn core_of(&self, cpu: usize) -> usize {
        cpu % self.nr_cores()
    }
    #[inline]
    pub fn thread_of(&self, cpu: usize) -> usize {
        cpu / self.nr_cores()
    }
    #[inline]
    pub fn socket_of(&self, cpu: usize) -> usize {
        self.core_of(cpu) / self.cores_per_socket
    }
    /// The NUMA node of a CPU (cores split evenly among a socket's nodes).
    #[inline]
    pub fn node_of(&self, cpu: usize) -> usize {
        let core = self.core_of(cpu);
        let in_socket = core % self.cores_per_socket;
        self.socket_of(cpu) * self.nodes_per_socket
            + in_socket * self.nodes_per_socket / self.cores_per_socket
    }
    #[inline]
    pub fn socket_of_node(&self, node: usize) -> usize {
        node / self.nodes_per_socket
    }
    /// Which LLC instance serves a core, and the core's bit position in it.
    #[inline]
    pub fn llc_of_core(&self, core: usize) -> (usize, usize) {
        let per = self.cores_per_socket / self.llc_per_socket;
        (core / per, core % per)
    }
    /// Cores served by one LLC instance.
    pub fn cores_per_llc(&self) -> usize {
        self.cores_per_socket / self.llc_per_socket
    }
    /// The SMT siblings of a CPU (including itself).
    pub fn siblings(&self, cpu: usize) -> Vec<usize> {
        let core = self.core_of(cpu);
        (0..self.threads_per_core)
            .map(|t| t * self.nr_cores() + core)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn e5() -> Topology {
        Topology {
            sockets: 2,
            cores_per_socket: 18,
            threads_per_core: 2,
            nodes_per_socket: 1,
            llc_per_socket: 1,
        }
    }
    #[test]
    fn linux_numbering() {
        let t = e5();
        assert_eq!(t.nr_cpus(), 72);
        assert_eq!((t.socket_of(0), t.core_of(0), t.thread_of(0)), (0, 0, 0));
        assert_eq!((t.socket_of(17), t.socket_of(18)), (0, 1));
        assert_eq!((t.core_of(36), t.thread_of(36), t.socket_of(36)), (0, 1, 0));
        assert_eq!((t.core_of(71), t.socket_of(71)), (35, 1));
        assert_eq!(t.siblings(5), vec![5, 41]);
        assert_eq!(t.node_of(54), 1);
    }
    #[test]
    fn bijection() {
        let t = Topology {
            sockets: 2,
            cores_per_socket: 64,
            threads_per_core: 2,
            nodes_per_socket: 4,
            llc_per_socket: 8,
        };
        let mut seen = std::collections::BTreeSet::new();
        for cpu in 0..t.nr_cpus() {
            assert!(seen.insert((t.socket_of(cpu), t.core_of(cpu), t.thread_of(cpu))));
            assert!(t.node_of(cpu) < t.nr_nodes());
            let (llc, bit) = t.llc_of_core(t.core_of(cpu));
            assert!(llc < t.nr_llcs() && bit < 8);
        }
    }
}
