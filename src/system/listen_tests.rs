//! Fixture tests of `listen`: the `/proc/net/tcp*` tables as the kernel prints them on a
//! little-endian machine, and fake process trees with `socket:[inode]` links.

use super::*;
use crate::system::fixture::FakeRoot;

const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1605 1 000000000cb4c0f8 100 0 0 10 0
   1: 0100007F:91BB 0100007F:E45A 06 00000000:00000000 03:000010B2 00000000     0        0 0 3 00000000dbd3d0a2
   2: 0100007F:0BB9 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0
   3: 0100007F:0BBA 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 5151 1 0000000000000000 20 4 30 10 -1
   4: garbage
";

const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0BBB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 7001 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:0BBC 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 7002 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:0BBD 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 7003 1 0000000000000000 100 0 0 10 0
";

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

fn sock(addr: IpAddr, port: u16, inode: u64) -> ListenSocket {
    ListenSocket {
        addr,
        port,
        uid: 1000,
        inode,
    }
}

/// The listening sockets in `TCP`.
fn tcp_listeners() -> Vec<ListenSocket> {
    vec![
        ListenSocket {
            addr: v4(0, 0, 0, 0),
            port: 2024,
            uid: 0,
            inode: 1605,
        },
        sock(v4(127, 0, 0, 1), 3001, 4242),
    ]
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::new(v4(127, 0, 0, 1), port)
}

#[test]
#[cfg(target_endian = "little")]
fn v4_table_keeps_listening_sockets_only() {
    // The TIME_WAIT (06) and ESTABLISHED (01) lines, the header and garbage are skipped.
    assert_eq!(parse_net_tcp(TCP), tcp_listeners());
}

#[test]
#[cfg(target_endian = "little")]
fn v6_table_decodes_words_in_host_order() {
    let s = parse_net_tcp(TCP6);
    assert_eq!(s.len(), 3);
    assert_eq!(
        (s[0].addr, s[0].port),
        (IpAddr::V6(Ipv6Addr::UNSPECIFIED), 3003)
    );
    assert_eq!(
        (s[1].addr, s[1].port),
        (IpAddr::V6(Ipv6Addr::LOCALHOST), 3004)
    );
    assert_eq!(
        s[2].addr,
        IpAddr::V6(Ipv4Addr::new(127, 0, 0, 1).to_ipv6_mapped())
    );
    assert_eq!(s[2].inode, 7003);
}

#[test]
fn bad_addresses_are_refused() {
    for bad in [
        "",
        "0100007F",
        "0100007F:",
        "0100007:0BB8",
        "XX00007F:0BB8",
        "0100007F:1FFFF",
        "00000000000000000000000001000000FF:0001",
    ] {
        assert_eq!(parse_address(bad), None, "{bad:?}");
    }
}

#[test]
fn wildcards_and_mapped_addresses_cover_the_wanted_one() {
    let lo = v4(127, 0, 0, 1);
    let mapped = IpAddr::V6(Ipv4Addr::new(127, 0, 0, 1).to_ipv6_mapped());
    let any4 = v4(0, 0, 0, 0);
    let any6 = IpAddr::V6(Ipv6Addr::UNSPECIFIED);
    let lo6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
    assert!(covers(lo, lo));
    assert!(covers(mapped, lo));
    assert!(covers(lo, mapped));
    assert!(covers(any4, lo));
    assert!(covers(any6, lo));
    assert!(covers(any6, lo6));
    assert!(!covers(any4, lo6));
    assert!(!covers(v4(10, 0, 0, 5), lo));
    assert!(!covers(lo6, lo));
    assert!(!covers(lo, any4));
}

#[test]
fn own_socket_is_ready_anyone_elses_is_not() {
    // spec: LAUNCH-4
    let sockets = [
        sock(v4(127, 0, 0, 1), 3002, 10),
        sock(v4(10, 0, 0, 5), 3001, 11),
        sock(v4(0, 0, 0, 0), 3001, 12),
    ];
    let none = HashMap::new();
    // A stranger's socket on the port, and one on another address that doesn't count at all.
    assert_eq!(
        decide(&sockets, loopback(3001), &none),
        Look::Others(vec![Other {
            socket: sockets[2],
            holder: None
        }])
    );
    assert_eq!(decide(&sockets, loopback(3005), &none), Look::Nothing);
    // The child's tree holds inode 12 (a wrapper's child, pid 77).
    let tree = HashMap::from([(12, 77), (99, 76)]);
    assert_eq!(
        decide(&sockets, loopback(3001), &tree),
        Look::Own {
            pid: 77,
            addr: v4(0, 0, 0, 0)
        }
    );
    // Holding a socket on another port is not listening on ours.
    let tree = HashMap::from([(10, 77)]);
    assert!(matches!(
        decide(&sockets, loopback(3001), &tree),
        Look::Others(_)
    ));
}

#[test]
fn ownership_is_the_shared_socket_even_with_a_stranger_beside_it() {
    // An old process and the new one both listening (SO_REUSEPORT): the new one's counts.
    let sockets = [
        sock(v4(127, 0, 0, 1), 3001, 20),
        sock(v4(127, 0, 0, 1), 3001, 21),
    ];
    let tree = HashMap::from([(21, 5)]);
    assert_eq!(
        decide(&sockets, loopback(3001), &tree),
        Look::Own {
            pid: 5,
            addr: v4(127, 0, 0, 1)
        }
    );
}

#[test]
fn helpers_parse_links_and_stat() {
    assert_eq!(socket_inode("socket:[12345]"), Some(12345));
    assert_eq!(socket_inode("pipe:[12345]"), None);
    assert_eq!(socket_inode("socket:[x]"), None);
    assert_eq!(parse_ppid("42 (my (odd) name) S 7 42 42 0"), Some(7));
    assert_eq!(parse_ppid("42 (x"), None);
    let mut d = None;
    let mut seen = Vec::new();
    for _ in 0..7 {
        let next = next_interval(d);
        seen.push(next.as_millis());
        d = Some(next);
    }
    assert_eq!(seen, [50, 100, 200, 400, 800, 1000, 1000]);
}

/// A fake `/proc` with `pid`'s fd links to sockets and its stat naming its parent.
fn process(root: &FakeRoot, pid: u32, ppid: u32, cmd: &str, inodes: &[u64]) {
    root.write(
        &format!("proc/{pid}/stat"),
        &format!("{pid} ({cmd}) S {ppid} 1 1 0"),
    );
    root.write(&format!("proc/{pid}/cmdline"), &format!("{cmd}\0--flag\0"));
    let fd = root.path().join(format!("proc/{pid}/fd"));
    std::fs::create_dir_all(&fd).expect("fd dir");
    std::os::unix::fs::symlink("/dev/null", fd.join("0")).expect("link");
    for (i, inode) in inodes.iter().enumerate() {
        std::os::unix::fs::symlink(format!("socket:[{inode}]"), fd.join((i + 3).to_string()))
            .expect("link");
    }
}

#[test]
#[cfg(target_endian = "little")]
fn a_server_under_a_wrapper_is_found_through_stat_parents() {
    let root = FakeRoot::new();
    root.write("proc/net/tcp", TCP);
    // 100 is the launcher's child (a shell), 101 its child the server, 102 a grandchild.
    process(&root, 100, 1, "sh", &[]);
    process(&root, 101, 100, "python3", &[9]);
    process(&root, 102, 101, "helper", &[4242]);
    process(&root, 200, 1, "stranger", &[1605]);
    assert_eq!(family(root.path(), 100), vec![100, 101, 102]);
    assert_eq!(
        look(root.path(), 100, loopback(3001), true),
        Ok(Look::Own {
            pid: 102,
            addr: v4(127, 0, 0, 1)
        })
    );
    // Port 2024 is the stranger's (0.0.0.0): named with its pid and command.
    let found = look(root.path(), 100, loopback(2024), true);
    let Ok(Look::Others(others)) = found else {
        panic!("expected others, got {found:?}");
    };
    assert_eq!(others[0].holder, Some((200, "stranger --flag".to_string())));
    assert_eq!(
        others[0].to_string(),
        "pid 200 (stranger --flag) listens on 0.0.0.0:2024"
    );
    // Without naming, nobody is looked up.
    assert!(matches!(
        look(root.path(), 100, loopback(2024), false),
        Ok(Look::Others(o)) if o[0].holder.is_none()
    ));
    assert_eq!(look(root.path(), 100, loopback(9), true), Ok(Look::Nothing));
}

#[test]
#[cfg(target_endian = "little")]
fn children_files_are_used_where_the_kernel_has_them() {
    let root = FakeRoot::new();
    root.write("proc/net/tcp", "");
    root.write("proc/net/tcp6", TCP6);
    process(&root, 100, 1, "sh", &[]);
    // No stat names 300 as 100's child: only the children file does.
    root.write("proc/100/task/100/children", "300 ");
    process(&root, 300, 1, "node", &[7003]);
    root.write("proc/300/task/300/children", "");
    assert_eq!(family(root.path(), 100), vec![100, 300]);
    assert_eq!(
        look(root.path(), 100, loopback(3005), true),
        Ok(Look::Own {
            pid: 300,
            addr: IpAddr::V6(Ipv4Addr::new(127, 0, 0, 1).to_ipv6_mapped())
        })
    );
    // A socket the other side of the tree can't see is unnamed but still reported.
    let found = look(root.path(), 999, loopback(3003), true);
    assert!(
        matches!(&found, Ok(Look::Others(o)) if o[0].holder.is_none()),
        "{found:?}"
    );
    assert_eq!(
        Other {
            socket: sock(v4(127, 0, 0, 1), 1, 1),
            holder: None
        }
        .to_string(),
        "a process the launcher cannot see (uid 1000) listens on 127.0.0.1:1"
    );
}

#[test]
fn without_proc_net_it_says_why() {
    let root = FakeRoot::new();
    let err = look(root.path(), 1, loopback(1), true).unwrap_err();
    assert!(err.what.ends_with("proc/net/tcp"), "{err}");
}

#[test]
fn this_process_is_seen_holding_its_own_listener() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let me = std::process::id();
    assert_eq!(
        look(Path::new("/"), me, addr, true),
        Ok(Look::Own {
            pid: me,
            addr: v4(127, 0, 0, 1)
        })
    );
    // For a pid that doesn't exist (above any pid_max) it is someone else's, named as ours.
    let seen = look(Path::new("/"), 4_194_305, addr, true);
    assert!(
        matches!(&seen, Ok(Look::Others(o)) if o.iter().any(|o| o.holder.as_ref().map(|h| h.0) == Some(me))),
        "{seen:?}"
    );
}

#[test]
fn of_a_trees_sockets_on_the_port_the_one_on_every_interface_is_reported() {
    // A server listening on 127.0.0.1 and on 0.0.0.0 with SO_REUSEPORT, found in either order.
    let any = v4(0, 0, 0, 0);
    let tree = HashMap::from([(30, 8), (31, 9)]);
    for sockets in [
        [sock(v4(127, 0, 0, 1), 3001, 30), sock(any, 3001, 31)],
        [sock(any, 3001, 31), sock(v4(127, 0, 0, 1), 3001, 30)],
    ] {
        assert_eq!(
            decide(&sockets, loopback(3001), &tree),
            Look::Own { pid: 9, addr: any }
        );
    }
}

#[test]
fn a_server_on_every_interface_is_exposed_unless_told_to_listen_there() {
    // spec: #14 (listening on every interface)
    let lo = v4(127, 0, 0, 1);
    let any4 = v4(0, 0, 0, 0);
    let any6 = IpAddr::V6(Ipv6Addr::UNSPECIFIED);
    assert!(exposed(any4, lo));
    assert!(exposed(any6, lo));
    assert!(exposed(any6, v4(10, 0, 0, 5)));
    assert!(!exposed(lo, lo));
    assert!(!exposed(any4, any4), "told to: bindAddress 0.0.0.0");
    assert!(!exposed(any6, any4));
    assert!(
        !exposed(v4(10, 0, 0, 5), lo),
        "another address is not every interface"
    );
}

#[test]
fn conflicts_are_on_the_port_where_either_address_covers_the_other() {
    let lo = v4(127, 0, 0, 1);
    let any4 = v4(0, 0, 0, 0);
    let any6 = IpAddr::V6(Ipv6Addr::UNSPECIFIED);
    let sockets = [
        sock(lo, 3001, 1),
        sock(any4, 3002, 2),
        sock(v4(10, 0, 0, 5), 3003, 3),
        sock(IpAddr::V6(Ipv6Addr::LOCALHOST), 3004, 4),
    ];
    let inodes = |wanted: SocketAddr| -> Vec<u64> {
        conflicts(&sockets, wanted)
            .iter()
            .map(|s| s.inode)
            .collect()
    };
    assert_eq!(inodes(SocketAddr::new(lo, 3001)), [1]);
    assert_eq!(
        inodes(SocketAddr::new(any4, 3001)),
        [1],
        "every interface includes it"
    );
    assert_eq!(
        inodes(SocketAddr::new(lo, 3002)),
        [2],
        "its wildcard covers ours"
    );
    assert!(
        inodes(SocketAddr::new(lo, 3003)).is_empty(),
        "another address"
    );
    assert!(inodes(SocketAddr::new(any4, 3004)).is_empty(), "v6 only");
    assert_eq!(inodes(SocketAddr::new(any6, 3004)), [4]);
    assert_eq!(inodes(SocketAddr::new(any6, 3003)), [3]);
    assert!(inodes(SocketAddr::new(any6, 3005)).is_empty());
}

#[test]
#[cfg(target_endian = "little")]
fn a_held_port_is_named_with_its_holder() {
    let root = FakeRoot::new();
    root.write("proc/net/tcp", TCP);
    process(&root, 200, 1, "stranger", &[1605]);
    let held = held_by(root.path(), loopback(2024)).expect("readable");
    assert_eq!(
        held.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["pid 200 (stranger --flag) listens on 0.0.0.0:2024"]
    );
    assert_eq!(held_by(root.path(), loopback(2025)), Ok(Vec::new()));
    // The children of a process, by its children file or else by every stat's parent.
    process(&root, 201, 200, "kid", &[]);
    assert_eq!(children(root.path(), 200), [201]);
    root.write("proc/200/task/200/children", "7 8");
    assert_eq!(children(root.path(), 200), [7, 8]);
}

#[test]
fn this_process_holding_a_port_is_named() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), addr.port());
    let held = held_by(Path::new("/"), any).expect("readable");
    assert!(
        held.iter()
            .any(|o| o.holder.as_ref().map(|h| h.0) == Some(std::process::id())),
        "{held:?}"
    );
}

#[test]
#[cfg(target_endian = "little")]
fn a_busy_hosts_table_is_read_a_line_at_a_time_and_keeps_its_listeners() {
    // 100,000 connections (about 15 MB of text, what a busy host or a load test's TIME_WAITs
    // give) around two listening sockets; no tcp6 file (a kernel without IPv6).
    let mut text = String::from(TCP.lines().next().unwrap_or_default());
    text.push('\n');
    let conn = "0100007F:91BB 0100007F:E45A 06 00000000:00000000 03:000010B2 00000000     0        0 0 3 00000000dbd3d0a2\n";
    for i in 0..100_000 {
        if i == 50_000 {
            text.push_str(
                &TCP.lines()
                    .nth(1)
                    .unwrap_or_default()
                    .replacen("0:", "50000:", 1),
            );
            text.push('\n');
        }
        text.push_str(&format!("{i:6}: {conn}"));
    }
    text.push_str(TCP.lines().nth(3).unwrap_or_default());
    text.push('\n');
    let root = FakeRoot::new();
    root.write("proc/net/tcp", &text);
    assert_eq!(read_listening(root.path()), Ok(tcp_listeners()));
    assert!(
        read_listening(FakeRoot::new().path()).is_err(),
        "no tcp file: unreadable"
    );
}
