//! A real nginx for the tests that run nginx.md's configurations (`tests/ops_nginx.rs`): started
//! as a foreground process with its own prefix directory, stopped by its pid; and Debian's stock
//! nginx layout (its nginx.conf and default site, `tests/fixtures/debian-nginx`) in such a prefix.

use super::*;

const SIGTERM: i32 = 15;

/// A running nginx this test started; stopped (its pid only) when dropped.
pub struct Nginx {
    child: Child,
    prefix: tempfile::TempDir,
    pub addr: SocketAddr,
}

impl Nginx {
    /// Runs `block` (what goes inside `http { }`) with `{{LISTEN}}` on a free loopback port
    /// (and `{{SERVER_NAME}}` as `_`, no name of its own).
    pub fn start(block: &str, substitutions: &[(&str, String)]) -> Nginx {
        assert_nginx();
        let prefix = tempfile::tempdir().expect("nginx prefix dir");
        let p = prefix.path();
        let port = free_port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut body = block
            .replace("{{LISTEN}}", &addr.to_string())
            .replace("{{SERVER_NAME}}", "_");
        for (k, v) in substitutions {
            body = body.replace(k, v);
        }
        assert!(
            !body.contains("{{"),
            "a placeholder the test does not fill in:\n{body}"
        );
        let conf = format!(
            "{user}worker_processes 1;\nevents {{ worker_connections 256; }}\nhttp {{\n\
             access_log {access};\n{temp}{body}\n}}\n",
            user = run_as_root(),
            access = p.join("access.log").display(),
            temp = temp_paths(p),
        );
        let conf_path = p.join("nginx.conf");
        std::fs::write(&conf_path, &conf).expect("write nginx.conf");
        let globals = format!(
            "pid {}; error_log {} info;",
            p.join("nginx.pid").display(),
            p.join("error.log").display()
        );
        Nginx::run(prefix, &conf_path, &globals, addr)
    }

    /// Runs nginx on `conf` (in `prefix`), in the foreground, with `globals` added; waits until
    /// it accepts on `addr`.
    pub fn run(prefix: tempfile::TempDir, conf: &Path, globals: &str, addr: SocketAddr) -> Nginx {
        let p = prefix.path();
        let globals = format!("daemon off; master_process on; {globals}");
        let show = || std::fs::read_to_string(conf).unwrap_or_default();
        let test = run_bounded(
            Command::new("nginx")
                .arg("-t")
                .arg("-p")
                .arg(p)
                .arg("-c")
                .arg(conf)
                .arg("-g")
                .arg(&globals),
            Duration::from_secs(20),
        );
        assert_eq!(test.code, Some(0), "nginx -t:\n{}\n{}", test.all(), show());
        let child = Command::new("nginx")
            .arg("-p")
            .arg(p)
            .arg("-c")
            .arg(conf)
            .arg("-g")
            .arg(&globals)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let mut n = Nginx {
            child,
            prefix,
            addr,
        };
        let up = eventually(Duration::from_secs(10), || {
            std::net::TcpStream::connect(addr).is_ok() || matches!(n.child.try_wait(), Ok(Some(_)))
        });
        assert!(
            up && matches!(n.child.try_wait(), Ok(None)),
            "nginx did not start:\n{}",
            n.error_log()
        );
        n
    }

    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.path().join("error.log")).unwrap_or_default()
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        request(self.addr, method, path, headers, body)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // A fast stop (SIGTERM) lets the master take its workers with it; SIGKILL if it lingers.
        unsafe_kill(self.child.id() as i32, SIGTERM);
        let stopped = eventually(Duration::from_secs(5), || {
            matches!(self.child.try_wait(), Ok(Some(_)))
        });
        if !stopped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// nginx on PATH, or the test fails saying how to get it.
pub fn assert_nginx() {
    let ok = Command::new("nginx")
        .arg("-v")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "nginx is not installed (or not on PATH): these tests run nginx.md's configurations \
         with a real nginx; .ci/run installs it (apt-get install -y nginx)"
    );
}

/// Run as root here, the workers would otherwise switch to `nobody` (or Debian's `www-data`),
/// who can't write the temporary directories.
pub fn run_as_root() -> &'static str {
    if nix_is_root() {
        "user root;\n"
    } else {
        ""
    }
}

/// nginx's temporary directories in the prefix (for inside `http { }`), not the system's.
pub fn temp_paths(p: &Path) -> String {
    let d = |name: &str| p.join(name).display().to_string();
    format!(
        "client_body_temp_path {};\nproxy_temp_path {};\nfastcgi_temp_path {};\n\
         uwsgi_temp_path {};\nscgi_temp_path {};\n",
        d("body"),
        d("proxy"),
        d("fastcgi"),
        d("uwsgi"),
        d("scgi")
    )
}

pub fn nix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Debian's (and Ubuntu's) stock nginx, as `apt-get install nginx` leaves it: its nginx.conf
/// (which includes `conf.d/*.conf` and then `sites-enabled/*`) and the default site enabled
/// (`listen 80 default_server`), both copied verbatim from Debian 12's nginx 1.22.1 into
/// tests/fixtures/debian-nginx, their paths moved into the test's prefix and port 80 to a free
/// one. `print nginx` goes into conf.d as Deploy says.
pub struct DebianNginx {
    pub prefix: tempfile::TempDir,
    port: u16,
}

impl DebianNginx {
    pub fn new(printed: &str, port: u16) -> DebianNginx {
        assert_nginx();
        let prefix = tempfile::tempdir().expect("nginx prefix dir");
        let p = prefix.path();
        let moved = |text: &str| {
            text.replace("/etc/nginx/", &format!("{}/", p.display()))
                .replace("/var/log/nginx/", &format!("{}/", p.display()))
                .replace("/run/nginx.pid", &p.join("nginx.pid").display().to_string())
                .replace("/var/www/html", &p.join("html").display().to_string())
                .replace("user www-data;\n", run_as_root())
        };
        let fixture = |name: &str| crate_file(&format!("tests/fixtures/debian-nginx/{name}"));
        for dir in ["conf.d", "sites-enabled", "modules-enabled", "html"] {
            std::fs::create_dir(p.join(dir)).expect("a directory of the prefix");
        }
        std::fs::write(p.join("nginx.conf"), moved(&fixture("nginx.conf"))).expect("nginx.conf");
        std::fs::write(p.join("mime.types"), "types { text/html html; }\n").expect("mime.types");
        // The default site on the test's port; its IPv6 line left out (a host may have none).
        let default = moved(&fixture("sites-enabled-default"))
            .lines()
            .filter(|l| !l.contains("listen [::]:80"))
            .map(|l| l.replace("listen 80 ", &format!("listen {port} ")))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            default.contains(&format!("listen {port} default_server;")),
            "{default}"
        );
        std::fs::write(p.join("sites-enabled/default"), default).expect("the default site");
        std::fs::write(p.join("conf.d/fhircluster.conf"), printed).expect("the printed file");
        std::fs::write(p.join("conf.d/temp-paths.conf"), temp_paths(p)).expect("temp paths");
        DebianNginx { prefix, port }
    }

    pub fn start(self) -> Nginx {
        let conf = self.prefix.path().join("nginx.conf");
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        Nginx::run(self.prefix, &conf, "", addr)
    }
}
