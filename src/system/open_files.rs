//! The launcher's open-file limit (`RLIMIT_NOFILE`): every client connection, every connection
//! to a process, every child's channel and pipes, the logs and the databases take one file
//! descriptor, and at the limit each of them fails at once, the requests already in hand
//! included (they can no longer reach a process: `502`). systemd starts services with a soft
//! limit of 1024 and a hard one of 524288, so a thousand idle clients would do it; the launcher
//! raises its soft limit to the hard one at start, as HAProxy and the Go runtime do, and keeps
//! a share of it for its own work (`proxy::conn_limit`). Its children inherit the raised limit
//! (Node and Python servers poll with epoll, which has no `FD_SETSIZE`).

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// The soft limit before and after the start's raise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Raised {
    pub was: u64,
    pub now: u64,
}

/// Raises the soft limit to the hard one; where that is refused, the limit stays as it was.
pub fn raise_to_hard() -> Raised {
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return Raised { was: 0, now: 0 };
    };
    if soft >= hard || setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_err() {
        return Raised {
            was: soft,
            now: soft,
        };
    }
    Raised {
        was: soft,
        now: soft_limit(),
    }
}

/// The soft limit in force (0 when it can't be read).
pub fn soft_limit() -> u64 {
    getrlimit(Resource::RLIMIT_NOFILE).map_or(0, |(soft, _)| soft)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_ends_at_the_hard_one_and_never_lower() {
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
        let r = raise_to_hard();
        assert!(r.now >= r.was, "{r:?}");
        assert_eq!(r.now, hard, "{r:?}");
        assert_eq!(soft_limit(), hard);
    }
}
