//! The human-readable `--check` output, as `nginx -t` gives: the decision line, each process with
//! its role, code, address, the exact command line (quoted so it can be pasted into a shell) and
//! its environment, then the limits line.

use std::path::Path;

use super::Plan;
use crate::settings::Settings;

/// An argument as a POSIX shell would need it, so a printed command line can be pasted.
fn shell_quote(arg: &str) -> String {
    let plain_char = |ch: char| ch.is_ascii_alphanumeric() || "-_./=:,+@%".contains(ch);
    if !arg.is_empty() && arg.chars().all(plain_char) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The human-readable `--check` output: the decision line, each process (role, code, address,
/// the exact command line and its environment), then the limits line.
pub fn render_check(plan: &Plan) -> String {
    let mut out = format!("{}\n", plan.decision);
    for p in &plan.processes {
        let listen = host_port(&p.bind_address, p.port);
        let mut reached = p.connect_addr.to_string();
        for ip in &p.also_at {
            reached.push_str(&format!(" or {}", std::net::SocketAddr::new(*ip, p.port)));
        }
        let reached = if reached == listen {
            String::new()
        } else {
            format!(", reached at {reached}")
        };
        let tx = if p.serves_tx {
            "serves tx"
        } else {
            "does not serve tx"
        };
        out.push_str(&format!(
            "{} {} on {listen}{reached}, {tx}\n",
            p.role, p.code
        ));
        let argv: Vec<String> = p.argv.iter().map(|a| shell_quote(a)).collect();
        out.push_str(&format!("  command: {}\n", argv.join(" ")));
        let env: Vec<String> = p
            .env
            .iter()
            .map(|(k, v)| format!("{k}={}", shell_quote(v)))
            .collect();
        out.push_str(&format!("  env: {}\n", env.join(" ")));
    }
    if !plan.dropped_node_flags.is_empty() {
        out.push_str(&format!(
            "node flags not passed on (the launcher's own): {}\n",
            plan.dropped_node_flags.join(" ")
        ));
    }
    out.push_str(&plan.tx_endpoints);
    out.push('\n');
    out.push_str(&plan.limits);
    out.push('\n');
    out
}

/// Where `--check` says the settings came from: the file it read, or that it read none.
pub fn render_source(config: &Path, found: bool) -> String {
    if found {
        format!(
            "settings: {} and the flags and environment\n",
            config.display()
        )
    } else {
        format!(
            "settings: no {} (defaults, the flags and environment)\n",
            config.display()
        )
    }
}

/// Where clients, the launcher's own endpoints and the access log go, as `--check` prints them.
pub fn render_where(s: &Settings) -> String {
    let c = &s.cluster;
    let clients = match c.listen_address {
        None => format!(
            "[::]:{} (every interface, IPv6 and IPv4; 0.0.0.0 alone on a host without IPv6)",
            s.port
        ),
        Some(ip) => host_port(&ip.to_string(), s.port),
    };
    let admin = match c.admin_address {
        Some(a) => format!("{a} (read-only: /livez /readyz /status /metrics)"),
        None => "off (server.cluster.adminAddress)".to_string(),
    };
    let control = match s.control_socket_path() {
        Some(p) => {
            let p = std::path::absolute(&p).unwrap_or(p);
            let group = match c.control_group.as_str() {
                "" => "its own group".to_string(),
                g => format!("group {g}"),
            };
            format!(
                "{} (status, upgrade, scale, restart; mode 660: the launcher's user and {group})",
                p.display()
            )
        }
        None => "off (server.cluster.controlSocket)".to_string(),
    };
    let access = match (c.access_log.0, c.access_log_path.as_str()) {
        (None, _) => format!("{} (server.cluster.accessLog)", c.access_log.word()),
        (Some(format), "") => format!("{}, on stderr with the launcher's lines", format.word()),
        (Some(format), path) => {
            let file = s.data_dir.join(path);
            format!(
                "{}, to {} (reopened on SIGUSR1)",
                format.word(),
                file.display()
            )
        }
    };
    format!(
        "clients: {clients}\nadmin endpoint: {admin}\ncontrol socket: {control}\naccess log: \
         {access}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::plan;
    use crate::plan::test_support::{settings, sizing};
    use std::path::PathBuf;

    #[test]
    fn check_output_shows_every_process_exactly() {
        let mut s = settings();
        s.data_dir = PathBuf::from("/srv/fhir data");
        s.cluster.bind_address = "0.0.0.0".to_string();
        let p = plan(&s, &sizing(&s, 4, 4), None).unwrap();
        let text = render_check(&p);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], p.decision);
        assert!(p
            .decision
            .contains("memory fit decided once the master is loaded"));
        assert_eq!(
            lines[1],
            "master m0 on 0.0.0.0:3001, reached at 127.0.0.1:3001, serves tx"
        );
        assert_eq!(
            lines[2],
            "  command: node --expose-gc server.js --role=master --instance-code=m0 --port=3001"
        );
        assert_eq!(
            lines[3],
            "  env: FHIRSMITH_ROLE=master FHIRSMITH_INSTANCE_CODE=m0 PORT=3001 HOST=0.0.0.0 FHIRSMITH_DATA_DIR='/srv/fhir data' NODE_CHANNEL_FD=3 NODE_CHANNEL_SERIALIZATION_MODE=json"
        );
        assert_eq!(
            lines[4],
            "tx-worker tx1 on 0.0.0.0:3002, reached at 127.0.0.1:3002, serves tx"
        );
        assert_eq!(lines.len(), 12);
        assert_eq!(
            lines[10],
            "tx endpoints: none (modules.tx.endpoints is not set; FHIRsmith has no default): every request goes to the master"
        );
        assert_eq!(lines[11], p.limits);
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
