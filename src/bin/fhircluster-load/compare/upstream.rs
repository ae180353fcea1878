//! The fast upstream: an nginx answering every request with the same 628-byte FHIR `Parameters`
//! (a `$lookup` answer), from memory, one worker process. Its cost per request is small beside
//! any proxy's, so what a front door adds shows, where behind one `fhirsmith-sim` the sim's own
//! cost hid part of it.
//!
//! fhircluster runs it as its only process (`--workers 0`, the "any HTTP server" mode), which
//! hands a process its port as `--port=N` and in `PORT`: a `sh -c` wrapper writes the nginx
//! configuration for that port from a template and execs nginx (the launcher's own arguments
//! land in `$0`, `$1` ... and are ignored). nginx and HAProxy as front doors, and wrk for
//! "direct", use that same nginx as their upstream.

use std::path::Path;

use super::conf;

/// The answer: a `Parameters` for `$lookup` of LOINC 8480-6, 628 bytes. No `'`, `\` or `$`: it
/// sits in a single-quoted nginx string, where `$` would start a variable.
pub const BODY: &str = concat!(
    r#"{"resourceType":"Parameters","parameter":[{"name":"name","valueString":"LOINC"},"#,
    r#"{"name":"version","valueString":"2.8"},"#,
    r#"{"name":"display","valueString":"Systolic blood pressure"},"#,
    r#"{"name":"designation","part":[{"name":"language","valueCode":"en-US"},"#,
    r#"{"name":"use","valueCoding":{"system":"http://loinc.org","code":"LONG_COMMON_NAME"}},"#,
    r#"{"name":"value","valueString":"Systolic blood pressure"}]},"#,
    r#"{"name":"property","part":[{"name":"code","valueCode":"COMPONENT"},"#,
    r#"{"name":"value","valueString":"Pressure.systolic"}]},"#,
    r#"{"name":"property","part":[{"name":"code","valueCode":"CLASS"},"#,
    r#"{"name":"value","valueCoding":{"code":"BP.ATOM"}}]}]}"#
);

/// What the template has where the port goes.
pub const PORT_MARK: &str = "@PORT@";

/// The nginx configuration, with `@PORT@` for the port; every file it writes is under `dir`.
pub fn nginx_template(dir: &Path) -> String {
    let http = format!(
        "    # Keep-alive connections are not closed after 1,000 requests (the default): every
    # front door's pool to it, and wrk direct, keep theirs.
    keepalive_requests 100000000;
    server {{
        listen 127.0.0.1:{PORT_MARK} backlog=16384;
        default_type application/fhir+json;
        location / {{
            return 200 '{BODY}';
        }}
    }}
"
    );
    let name = format!("upstream-{PORT_MARK}");
    conf::frame(dir, 1, &name, &format!("{name}-error"), &http)
}

/// `s` as one word for `sh`.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The command fhircluster runs: writes `dir/upstream-$PORT.conf` from `dir/upstream.conf.in`
/// (`nginx_template`) and execs nginx on it, pinned to `pin` (a `taskset -c` CPU list) if given.
pub fn command(dir: &Path, pin: Option<&str>) -> Vec<String> {
    let d = sh_quote(&dir.display().to_string());
    let taskset = pin.map_or_else(String::new, |cpus| {
        format!("taskset -c {} ", sh_quote(cpus))
    });
    let script = format!(
        "sed \"s/{PORT_MARK}/$PORT/g\" {d}/upstream.conf.in > {d}/upstream-\"$PORT\".conf && \
         exec {taskset}nginx -p {d} -e {d}/upstream-\"$PORT\"-error.log -c {d}/upstream-\"$PORT\".conf"
    );
    vec!["sh".to_string(), "-c".to_string(), script]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn the_body_is_628_bytes_of_fhir_json_safe_in_an_nginx_string() {
        assert_eq!(BODY.len(), 628);
        let v: serde_json::Value = serde_json::from_str(BODY).unwrap_or_default();
        assert_eq!(v["resourceType"], "Parameters");
        assert!(!BODY.contains(['\'', '\\', '$']));
    }

    #[test]
    fn the_template_listens_on_loopback_at_the_port_with_one_worker() {
        let c = nginx_template(Path::new("/tmp/up"));
        assert!(c.starts_with("daemon off;\nworker_processes 1;"));
        assert!(c.contains("listen 127.0.0.1:@PORT@ "));
        assert!(c.contains("default_type application/fhir+json;"));
        assert!(c.contains(&format!("return 200 '{BODY}';")));
        for line in c
            .lines()
            .filter(|l| l.contains("_path ") || l.contains("pid "))
        {
            assert!(line.contains("/tmp/up/"), "{line}");
        }
        assert_eq!(c.matches('{').count(), c.matches('}').count());
    }

    #[test]
    fn the_wrapper_fills_the_port_in_and_execs_nginx() -> anyhow::Result<()> {
        // Run the wrapper for real with a stand-in `nginx` on the PATH that prints what it got.
        let dir = tempfile::tempdir()?;
        let d = dir.path().join("it's here");
        std::fs::create_dir_all(&d)?;
        std::fs::write(d.join("upstream.conf.in"), nginx_template(&d))?;
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin)?;
        let fake = bin.join("nginx");
        std::fs::write(&fake, "#!/bin/sh\necho \"$@\"\n")?;
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(&fake)
            .status()?;
        let argv = command(&d, None);
        let out = Command::new(&argv[0])
            .args(&argv[1..])
            // What fhircluster appends: it lands in $0, $1 and is ignored.
            .args(["--role=master", "--port=18123"])
            .env("PORT", "18123")
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .output()?;
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{said}");
        let conf = d.join("upstream-18123.conf");
        assert!(said.contains(&format!("-c {}", conf.display())), "{said}");
        let written = std::fs::read_to_string(conf)?;
        assert!(written.contains("listen 127.0.0.1:18123 "));
        assert!(!written.contains(PORT_MARK));
        let pinned = command(&d, Some("1")).join(" ");
        assert!(pinned.contains("exec taskset -c '1' nginx"), "{pinned}");
        Ok(())
    }
}
