//! What a command (`status`, `print`, `upgrade`, `--check`, `--upgrade-formats`) writes on stdout.
//!
//! A reader that goes away early (`| head -1`, `| grep -q ready`) is no failure of the command:
//! what it did not read is dropped and the exit status keeps its meaning, so a health check
//! piped into `head` still says ready or not. Rust's `print!` panics there instead (the
//! launcher ignores `SIGPIPE`, as it must for its sockets). Any other failure to write, a full
//! disk behind `>` for one, is one line on stderr and exit status 1: a file a package installs
//! from `fhircluster print` is never cut short in silence.

use std::io::{self, Write};
use std::process::ExitCode;

/// Writes `text` whole on stdout. `Err` carries the exit status to end with (1) once the reason
/// is on stderr, named for `command`.
pub(crate) fn emit(command: &str, text: &str) -> Result<(), ExitCode> {
    emit_to(&mut io::stdout().lock(), command, text)
}

fn emit_to(out: &mut impl Write, command: &str, text: &str) -> Result<(), ExitCode> {
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => {
            eprintln!("fhircluster {command}: writing to stdout: {e}");
            Err(ExitCode::from(1))
        }
    }
}

/// `emit`, then `code`: the exit status a command ends with once its output is written.
pub(crate) fn emit_then(command: &str, text: &str, code: ExitCode) -> ExitCode {
    match emit(command, text) {
        Ok(()) => code,
        Err(failed) => failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Failing(io::ErrorKind);

    impl Write for Failing {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(self.0))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_reader_gone_early_is_no_failure_and_a_full_disk_is() {
        assert_eq!(emit_to(&mut Vec::new(), "print", "unit"), Ok(()));
        let gone = emit_to(&mut Failing(io::ErrorKind::BrokenPipe), "status", "table");
        assert_eq!(gone, Ok(()));
        let full = emit_to(&mut Failing(io::ErrorKind::StorageFull), "print", "unit");
        assert_eq!(full, Err(ExitCode::from(1)));
    }
}
