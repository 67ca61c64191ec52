//! A private network of Linux network namespaces, for tests that cut a
//! mesh in parts: each host a namespace of its own with one address on a
//! bridge, the bridge in a namespace of its own (so the machine's own
//! firewall, Docker's `FORWARD` policy among it, never sees the traffic),
//! and a link from the test's namespace to the bridge, so the test reaches
//! every host's API.
//!
//! [`Network::cut`] drops every packet between two groups of hosts with
//! `iptables` rules inside their namespaces, silently, as a broken link
//! drops them (no reset, no ICMP); [`Network::heal`] removes the rules.
//! Needs root and `ip` (iproute2) and `iptables`; everything is removed on
//! drop.

use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicU8, Ordering};

/// One host: its namespace and its address.
#[derive(Debug, Clone)]
pub struct Host {
    /// The namespace's name (`ip netns`).
    pub netns: String,
    /// The host's address on the bridge.
    pub ip: Ipv4Addr,
}

/// The namespaces, the bridge and the link to it.
pub struct Network {
    hosts: Vec<Host>,
    switch: String,
    uplink: String,
}

/// Runs `ip`-family `program` with `args`, failing the test with its
/// error output.
fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (iproute2, iptables, as root): {e}"));
    assert!(
        out.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether this process can make network namespaces (root, `ip` there).
pub fn available() -> bool {
    let name = format!("amprobe{}", std::process::id());
    let made = Command::new("ip")
        .args(["netns", "add", &name])
        .output()
        .is_ok_and(|o| o.status.success());
    if made {
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
    }
    made && crate::common::on_path("iptables").is_some()
}

impl Network {
    /// `n` hosts (at most 200) on one bridge.
    pub fn new(n: usize) -> Self {
        static NEXT: AtomicU8 = AtomicU8::new(0);
        assert!(n <= 200);
        let pid = std::process::id();
        let serial = NEXT.fetch_add(1, Ordering::Relaxed);
        // Names unique on the machine (interface names hold 15 bytes).
        let tag = format!("{}{serial}", pid % 100_000);
        let subnet = [10, 100 + (pid % 100) as u8, serial, 0];
        let at = |last: u8| Ipv4Addr::new(subnet[0], subnet[1], subnet[2], last);
        let mut network = Self {
            hosts: Vec::new(),
            switch: format!("am{tag}-sw"),
            uplink: format!("amu{tag}"),
        };
        let sw = network.switch.clone();
        run("ip", &["netns", "add", &sw]);
        run("ip", &["-n", &sw, "link", "add", "br0", "type", "bridge"]);
        run("ip", &["-n", &sw, "link", "set", "br0", "up"]);
        let uplink = network.uplink.clone();
        run(
            "ip",
            &[
                "link", "add", &uplink, "type", "veth", "peer", "name", "up0", "netns", &sw,
            ],
        );
        run(
            "ip",
            &["addr", "add", &format!("{}/24", at(1)), "dev", &uplink],
        );
        run("ip", &["link", "set", &uplink, "up"]);
        run("ip", &["-n", &sw, "link", "set", "up0", "master", "br0"]);
        run("ip", &["-n", &sw, "link", "set", "up0", "up"]);
        for i in 0..n {
            let host = Host {
                netns: format!("am{tag}-{i}"),
                ip: at(10 + i as u8),
            };
            let port = format!("p{i}");
            run("ip", &["netns", "add", &host.netns]);
            network.hosts.push(host.clone());
            run(
                "ip",
                &[
                    "-n",
                    &sw,
                    "link",
                    "add",
                    &port,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    "eth0",
                    "netns",
                    &host.netns,
                ],
            );
            run("ip", &["-n", &sw, "link", "set", &port, "master", "br0"]);
            run("ip", &["-n", &sw, "link", "set", &port, "up"]);
            let ns = host.netns.as_str();
            run(
                "ip",
                &[
                    "-n",
                    ns,
                    "addr",
                    "add",
                    &format!("{}/24", host.ip),
                    "dev",
                    "eth0",
                ],
            );
            run("ip", &["-n", ns, "link", "set", "eth0", "up"]);
            run("ip", &["-n", ns, "link", "set", "lo", "up"]);
        }
        network
    }

    /// Host `i`.
    pub fn host(&self, i: usize) -> &Host {
        &self.hosts[i]
    }

    /// Drops every packet between the hosts of `left` and those of
    /// `right`, both ways, without a word to either side.
    pub fn cut(&self, left: &[usize], right: &[usize]) {
        for (near, far) in [(left, right), (right, left)] {
            for &i in near {
                for &j in far {
                    let (ns, other) = (&self.hosts[i].netns, self.hosts[j].ip.to_string());
                    for rule in [["INPUT", "-s"], ["OUTPUT", "-d"]] {
                        run(
                            "ip",
                            &[
                                "netns", "exec", ns, "iptables", "-A", rule[0], rule[1], &other,
                                "-j", "DROP",
                            ],
                        );
                    }
                }
            }
        }
    }

    /// Removes every cut.
    pub fn heal(&self) {
        for host in &self.hosts {
            for chain in ["INPUT", "OUTPUT"] {
                run(
                    "ip",
                    &["netns", "exec", &host.netns, "iptables", "-F", chain],
                );
            }
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of each link, and so the
        // link.
        for host in &self.hosts {
            let _ = Command::new("ip")
                .args(["netns", "del", &host.netns])
                .output();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.switch])
            .output();
        let _ = Command::new("ip")
            .args(["link", "del", &self.uplink])
            .output();
    }
}

/// Has `cmd`'s process enter `host`'s namespace before it runs.
pub fn enter(cmd: &mut Command, host: &Host) {
    let path = format!("/run/netns/{}", host.netns);
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    // SAFETY: between fork and exec the closure only makes the setns(2)
    // system call on a descriptor the parent keeps open (moved in here).
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}
