//! The safe wrappers' own promises, where a wrong answer would be a double close or a leak.

use std::os::fd::{AsRawFd, IntoRawFd};

use super::ffi::*;

#[test]
fn an_inherited_fd_is_taken_over_once_and_a_closed_one_not_at_all() {
    // One end of a pipe, its ownership given up as if it had come through an execve.
    let (read, write) = nix::unistd::pipe().expect("a pipe");
    let raw = read.into_raw_fd();
    let owned = adopt_inherited(raw).expect("an open fd is taken over");
    assert_eq!(owned.as_raw_fd(), raw);
    let again = adopt_inherited(raw).expect_err("a second owner of the same fd");
    assert_eq!(again.kind(), std::io::ErrorKind::AlreadyExists);
    drop(owned);
    // Closed now: its number may come back for another file, which must not be taken.
    let err = adopt_inherited(raw).expect_err("a closed fd");
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    let unused = write.as_raw_fd() + 1000;
    let err = adopt_inherited(unused).expect_err("an fd that is not open");
    assert_eq!(err.raw_os_error(), Some(libc::EBADF));
}

#[test]
fn an_fd_opened_after_the_program_began_is_not_taken_as_inherited() {
    // spec: DEC-59
    // What was open at entry, then a file this program opens itself: named (wrongly) as
    // inherited, it is refused and stays open for its owner.
    let (read, write) = nix::unistd::pipe().expect("a pipe");
    let raw = read.as_raw_fd();
    let at_entry = [raw + 1000];
    let err = adopt_checked(raw, Some(&at_entry)).expect_err("not open at entry");
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("not inherited"), "{err}");
    assert!(
        nix::fcntl::fcntl(raw, nix::fcntl::FcntlArg::F_GETFD).is_ok(),
        "the refused fd is still its owner's"
    );
    // One open at entry is taken.
    let raw_w = write.into_raw_fd();
    let owned = adopt_checked(raw_w, Some(&[raw_w])).expect("open at entry");
    assert_eq!(owned.as_raw_fd(), raw_w);
    drop(read);
}
