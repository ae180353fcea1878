//! The lame duck of a stop (`lameDuckSeconds`, DEC-88): after the stop signal the launcher goes
//! on accepting and serving, `/readyz` answering `503` and the agent `drain`, so the balancers in
//! front see the host leave and stop sending to it before its port closes; then the drain. A
//! second stop signal skips what is left of the wait (`signals::Phase::LameDuck`). The lines it
//! logs are made here, pure; `Launcher::lame_duck` waits.

use std::time::Duration;

use tracing::info;

use super::{exit_code, log_signal, Launcher};
use crate::ops::signal_stream::Signals;
use crate::signals::{meaning, Meaning, Phase, Sig};

/// How the lame duck ended.
pub(super) enum Ended {
    /// Its time ran out, or a second stop signal cut it short: the drain comes next.
    Drain,
    /// The supervisor ended by itself meanwhile (the master given up on): this exit status.
    Supervisor(std::process::ExitCode),
}

/// The stop signal's line: what comes, in order, and what a second signal does.
pub(super) fn stop_line(sig: Sig, lame_duck: Duration) -> String {
    if lame_duck.is_zero() {
        return format!(
            "{sig}: stopping (the drain, then the processes in order; another SIGTERM, SIGINT or \
             SIGQUIT cuts the drain short)"
        );
    }
    format!(
        "{sig}: stopping: lame duck for {} s first (/readyz answers 503, /livez 200, clients are \
         served as before), then the drain, then the processes in order; another SIGTERM, SIGINT \
         or SIGQUIT skips the lame duck's wait",
        secs(lame_duck)
    )
}

/// The line as the drain begins: the wait run out, or cut short by `sig` after `waited`.
pub(super) fn over_line(cut_by: Option<Sig>, waited: Duration) -> String {
    match cut_by {
        None => format!(
            "lame duck over after {} s: draining (the listener closes)",
            secs(waited)
        ),
        Some(sig) => format!(
            "{sig} again: the lame duck cut short after {} s: draining now (the listener \
             closes)",
            secs(waited)
        ),
    }
}

/// Seconds as an operator reads them: `5`, `0.5`, `2.3`.
fn secs(d: Duration) -> String {
    let tenths = (d.as_secs_f64() * 10.0).round() / 10.0;
    format!("{tenths}")
}

impl Launcher {
    /// The lame duck: serving on, no longer ready, for `wait` or until a second stop signal.
    pub(super) async fn lame_duck(&mut self, signals: &mut Signals, wait: Duration) -> Ended {
        self.front.begin_lame_duck();
        let began = tokio::time::Instant::now();
        let end = tokio::time::sleep(wait);
        tokio::pin!(end);
        loop {
            tokio::select! {
                () = &mut end => {
                    info!("{}", over_line(None, began.elapsed()));
                    return Ended::Drain;
                }
                sig = signals.next() => match meaning(sig, Phase::LameDuck) {
                    Meaning::SkipLameDuck => {
                        info!("{}", over_line(Some(sig), began.elapsed()));
                        return Ended::Drain;
                    }
                    m => log_signal(sig, &m, &self.front.access_log),
                },
                ended = &mut self.supervisor => {
                    return Ended::Supervisor(exit_code(ended.ok()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_line_names_the_lame_duck_only_when_there_is_one() {
        // spec: DEC-88
        let none = stop_line(Sig::Term, Duration::ZERO);
        assert!(none.starts_with("SIGTERM: stopping (the drain"), "{none}");
        assert!(!none.contains("lame duck"), "{none}");
        let five = stop_line(Sig::Int, Duration::from_secs(5));
        assert!(
            five.starts_with("SIGINT: stopping: lame duck for 5 s first"),
            "{five}"
        );
        assert!(five.contains("/readyz answers 503") && five.contains("skips"));
    }

    #[test]
    fn the_over_line_says_how_the_wait_ended() {
        // spec: DEC-88
        assert_eq!(
            over_line(None, Duration::from_millis(5004)),
            "lame duck over after 5 s: draining (the listener closes)"
        );
        let cut = over_line(Some(Sig::Term), Duration::from_millis(2340));
        assert!(
            cut.starts_with("SIGTERM again: the lame duck cut short after 2.3 s"),
            "{cut}"
        );
    }
}
