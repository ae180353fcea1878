//! The sim's command line, read the way `node server.js` reads its own: `--role`,
//! `--instance-code`, `--port` (with `=` or as the next argument), each also from the
//! environment (`FHIRSMITH_ROLE`, `FHIRSMITH_INSTANCE_CODE`, `PORT`), the flag winning. Anything
//! else (Node's own flags such as `--expose-gc` and `--max-old-space-size=N`, a `server.js`
//! script name) is accepted and reported (SIM-2), never an error. Pure: the environment comes in
//! as a lookup function.

use fhircluster::process::Role;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimArgs {
    pub role: Option<Role>,
    pub instance_code: Option<String>,
    pub port: Option<u16>,
    pub help: bool,
    /// `--max-old-space-size=N` (MB): the heap limit a Node process would have.
    pub max_old_space_mb: Option<u64>,
    /// Every argument after the program name, as given.
    pub argv: Vec<String>,
    /// Arguments the sim doesn't act on (Node flags, a script name ...), as given.
    pub unknown: Vec<String>,
}

/// Parses `args` (without the program name). Errors are the ones `node server.js` stops with.
pub fn parse(args: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<SimArgs, String> {
    let mut out = SimArgs {
        argv: args.to_vec(),
        ..SimArgs::default()
    };
    let mut role_flag = None;
    let mut code_flag = None;
    let mut port_flag = None;
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (arg.as_str(), None),
        };
        let slot = match name {
            "--role" => Some(&mut role_flag),
            "--instance-code" => Some(&mut code_flag),
            "--port" => Some(&mut port_flag),
            _ => None,
        };
        if let Some(slot) = slot {
            let value = match inline {
                Some(v) => v,
                None => {
                    i += 1;
                    args.get(i)
                        .cloned()
                        .ok_or_else(|| format!("{name} needs a value"))?
                }
            };
            *slot = Some(value);
        } else if name == "--help" || name == "-h" {
            out.help = true;
        } else {
            if name == "--max-old-space-size" {
                out.max_old_space_mb = inline.as_deref().and_then(|v| v.parse().ok());
            }
            out.unknown.push(arg.clone());
        }
        i += 1;
    }
    let role = role_flag.or_else(|| env("FHIRSMITH_ROLE").filter(|s| !s.is_empty()));
    if role.is_none() && (code_flag.is_some() || port_flag.is_some()) {
        return Err("--port and --instance-code need --role".to_string());
    }
    out.role = match role.as_deref() {
        None => None,
        Some("master") => Some(Role::Master),
        Some("tx-worker") => Some(Role::TxWorker),
        Some(other) => return Err(format!("unknown role '{other}' (master or tx-worker)")),
    };
    out.instance_code =
        code_flag.or_else(|| env("FHIRSMITH_INSTANCE_CODE").filter(|s| !s.is_empty()));
    if let Some(code) = &out.instance_code {
        if code.is_empty() || code.len() > 16 || !code.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(format!(
                "instance code '{code}' must be 1-16 letters and digits"
            ));
        }
    }
    let port = port_flag.or_else(|| env("PORT").filter(|s| !s.is_empty()));
    out.port = match port {
        None => None,
        Some(p) => Some(
            p.parse()
                .map_err(|_| format!("port '{p}' is not a port number"))?,
        ),
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn flags_in_both_forms_and_node_flags_are_reported() {
        // spec: SIM-1, SIM-2
        let a = parse(
            &args(&[
                "--expose-gc",
                "--max-old-space-size=4096",
                "server.js",
                "--role=tx-worker",
                "--instance-code",
                "tx2",
                "--port=3003",
            ]),
            &no_env,
        );
        let a = a.unwrap_or_default();
        assert_eq!(a.role, Some(Role::TxWorker));
        assert_eq!(a.instance_code.as_deref(), Some("tx2"));
        assert_eq!(a.port, Some(3003));
        assert_eq!(a.max_old_space_mb, Some(4096));
        assert_eq!(
            a.unknown,
            args(&["--expose-gc", "--max-old-space-size=4096", "server.js"])
        );
        assert_eq!(a.argv.len(), 7);
    }

    #[test]
    fn environment_is_used_and_flags_win() {
        // spec: SIM-1
        let env = |k: &str| match k {
            "FHIRSMITH_ROLE" => Some("master".to_string()),
            "FHIRSMITH_INSTANCE_CODE" => Some("m7".to_string()),
            "PORT" => Some("4000".to_string()),
            _ => None,
        };
        let a = parse(&[], &env).unwrap_or_default();
        assert_eq!(
            (a.role, a.instance_code.as_deref(), a.port),
            (Some(Role::Master), Some("m7"), Some(4000))
        );
        let a = parse(&args(&["--port", "5000"]), &env).unwrap_or_default();
        assert_eq!(a.port, Some(5000));
    }

    #[test]
    fn mistakes_are_errors() {
        assert!(
            parse(&args(&["--port=1"]), &no_env).is_err(),
            "port without role"
        );
        assert!(parse(&args(&["--role=boss"]), &no_env).is_err());
        assert!(parse(&args(&["--role=master", "--port=x"]), &no_env).is_err());
        assert!(parse(&args(&["--role=master", "--port"]), &no_env).is_err());
        assert!(parse(&args(&["--role=master", "--instance-code=a.b"]), &no_env).is_err());
        assert!(parse(&args(&["--help"]), &no_env)
            .map(|a| a.help)
            .unwrap_or(false));
    }
}
