//! The few system calls several modules make, each wrapped once with its
//! `unsafe` and its check: the kernel's clock tick ([`clock_ticks`]), a
//! file system's space ([`space`], statvfs) and a file's extended status
//! ([`statx`]).

use std::ffi::CStr;
use std::io;
use std::os::fd::RawFd;
use std::path::Path;

/// Clock ticks per second, the unit of /proc's CPU times (`_SC_CLK_TCK`);
/// Linux's 100 when the system does not say.
pub(crate) fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// The space of a file system, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Space {
    /// What an unprivileged writer may still use (`f_bavail`: the space
    /// kept for root is left out).
    pub(crate) free: u64,
    /// The file system's size (`f_blocks`).
    pub(crate) total: u64,
}

/// The space of the file system holding `path` (statvfs).
pub(crate) fn space(path: &Path) -> io::Result<Space> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: a zeroed statvfs is a valid out-parameter.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statvfs to fill; the result is checked.
    if unsafe { libc::statvfs(name.as_ptr(), &mut vfs) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let unit = vfs.f_frsize as u64;
    Ok(Space {
        free: (vfs.f_bavail as u64).saturating_mul(unit),
        total: (vfs.f_blocks as u64).saturating_mul(unit),
    })
}

/// The extended status of `path` relative to `dir` (`libc::AT_FDCWD`, or
/// an open file with an empty path and `libc::AT_EMPTY_PATH` in `flags`),
/// asking for the fields of `mask`; which ones came is in its `stx_mask`.
pub(crate) fn statx(dir: RawFd, path: &CStr, flags: i32, mask: u32) -> io::Result<libc::statx> {
    // SAFETY: a zeroed statx is a valid out-parameter.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statx to fill; an empty path
    // names `dir` itself only with AT_EMPTY_PATH, else the call fails; the
    // result is checked.
    if unsafe { libc::statx(dir, path.as_ptr(), flags, mask, &mut stx) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;

    /// The tick is the one `getconf` reports on this host.
    #[test]
    fn the_clock_tick_is_the_systems() {
        let out = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .expect("getconf runs");
        let said: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        assert_eq!(clock_ticks(), said);
    }

    /// A real file system has room and no more free than its size; a path
    /// that is not there, or that no C string can hold, is an error.
    #[test]
    fn a_file_systems_space_is_read_and_a_missing_path_refused() {
        let dir = tempfile::tempdir().unwrap();
        let s = space(dir.path()).unwrap();
        assert!(s.total > 0 && s.free <= s.total, "{s:?}");
        let err = space(&dir.path().join("absent")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        let err = space(Path::new("a\0b")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    /// By path and by open file, statx finds the inode and device the
    /// standard library sees; a missing path is an error.
    #[test]
    fn statx_by_path_and_by_open_file_agrees_with_stat() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"x").unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        let name = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        let by_path = statx(libc::AT_FDCWD, &name, 0, libc::STATX_INO).unwrap();
        assert_eq!(by_path.stx_ino, meta.ino());
        let file = std::fs::File::open(&path).unwrap();
        let by_fd = statx(
            file.as_raw_fd(),
            c"",
            libc::AT_EMPTY_PATH,
            libc::STATX_INO | libc::STATX_SIZE,
        )
        .unwrap();
        assert_eq!(by_fd.stx_ino, meta.ino());
        assert_eq!(by_fd.stx_size, 1);
        assert_eq!(
            libc::makedev(by_fd.stx_dev_major, by_fd.stx_dev_minor),
            meta.dev()
        );
        let missing = std::ffi::CString::new(dir.path().join("absent").to_str().unwrap()).unwrap();
        let err = statx(libc::AT_FDCWD, &missing, 0, libc::STATX_INO).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
