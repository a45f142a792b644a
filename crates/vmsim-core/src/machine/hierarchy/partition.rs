//! The hierarchy's side of the windowed run loop (sim/window.rs): whether
//! a socket can access a line without touching what another socket owns or
//! reads (`is_local`), the deferral of a partition's effects on other
//! sockets (remote write-backs, presence counts of remote-homed lines) and
//! their application in a fixed order, and the lending of a socket's
//! caches, DRAM calendars and presence counts to a stand-in.
//!
//! Invariant: what a partition defers is applied in (time, socket, line)
//! order for write-backs and in arrival order for presence counts, so the
//! partitions' order never changes a result.

use super::Hierarchy;

impl Hierarchy {
    #[cold]
    #[inline(never)]
    pub(super) fn defer_writeback(&mut self, t: u64, socket: usize, line: u64) {
        self.deferred_wb.push((t, socket as u32, line));
    }

    #[cold]
    #[inline(never)]
    pub(super) fn defer_presence(&mut self, h: usize, i: usize, up: bool) {
        self.deferred_presence.push((h as u32, i as u32, up));
    }

    /// Whether socket `socket` can access `line` without touching anything
    /// another socket owns or reads: the line is homed on one of its nodes
    /// and no LLC instance of another socket holds a line of its 4 KiB
    /// region, nor (non-inclusive) can one of its cores hold a line of the
    /// node. Neither can change while only `socket`'s CPUs run.
    pub fn is_local(&self, socket: usize, line: u64) -> bool {
        let (node, base) = self.presence_at(line);
        if self.node_socket[node] != socket {
            return false;
        }
        let nodes = self.dram.len();
        let counts = &self.presence[node][base..base + self.llc.len()];
        counts.iter().enumerate().all(|(v, &c)| {
            self.socket_of_llc(v) == socket
                || (c == 0 && (self.inclusive || self.active_home[v * nodes + node] == 0))
        })
    }

    /// Starts or stops deferring (see `defer`): a partition advancing in
    /// place rather than in a stand-in.
    pub fn set_defer(&mut self, on: bool) {
        self.defer = on;
    }

    /// See [`super::Machine::lend`]: socket `s`'s private caches, LLCs,
    /// DRAM calendars and the presence counts of its memory move to
    /// `shell`; every instance's active cores by home node are copied.
    pub(in crate::machine) fn lend(&mut self, shell: &mut Hierarchy, s: usize) {
        // The caches change hands: both must run the same per-request path.
        assert_eq!(
            self.spec, shell.spec,
            "a stand-in of another kind of machine"
        );
        self.swap_socket(shell, s);
        shell.active_home.copy_from_slice(&self.active_home);
        shell.defer = true;
    }

    /// See [`super::Machine::take_back`].
    pub(in crate::machine) fn take_back(&mut self, shell: &mut Hierarchy, s: usize) {
        self.swap_socket(shell, s);
        let nodes = self.dram.len();
        let nps = self.topo.nodes_per_socket;
        for u in s * self.topo.llc_per_socket..(s + 1) * self.topo.llc_per_socket {
            for node in s * nps..(s + 1) * nps {
                self.active_home[u * nodes + node] = shell.active_home[u * nodes + node];
            }
        }
        self.deferred_wb.append(&mut shell.deferred_wb);
        self.deferred_presence.append(&mut shell.deferred_presence);
    }

    fn swap_socket(&mut self, shell: &mut Hierarchy, s: usize) {
        let cps = self.topo.cores_per_socket;
        for core in s * cps..(s + 1) * cps {
            std::mem::swap(&mut self.l1[core], &mut shell.l1[core]);
            std::mem::swap(&mut self.l2[core], &mut shell.l2[core]);
        }
        for u in s * self.topo.llc_per_socket..(s + 1) * self.topo.llc_per_socket {
            std::mem::swap(&mut self.llc[u], &mut shell.llc[u]);
        }
        let nps = self.topo.nodes_per_socket;
        for node in s * nps..(s + 1) * nps {
            std::mem::swap(&mut self.dram[node], &mut shell.dram[node]);
            std::mem::swap(&mut self.presence[node], &mut shell.presence[node]);
        }
    }

    /// Applies what was deferred: the presence counts, then the write-backs
    /// in (time, socket, line) order, whatever order the partitions ran in.
    pub fn apply_deferred(&mut self) {
        for (h, i, up) in self.deferred_presence.drain(..) {
            let c = &mut self.presence[h as usize][i as usize];
            if up {
                *c += 1;
            } else {
                *c -= 1;
            }
        }
        let mut wb = std::mem::take(&mut self.deferred_wb);
        wb.sort_unstable();
        for &(t, socket, line) in &wb {
            let node = self.home_node(line);
            self.dram_xfer(node, socket as usize, t, true);
        }
        wb.clear();
        self.deferred_wb = wb;
    }
}
