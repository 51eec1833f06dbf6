//! Reading this host's /proc and /sys files at every sample without
//! opening them each time: a file once opened stays open and is read again
//! from offset 0 (the kernel writes its text afresh on each read from the
//! start), which saves the path lookup, the open and the close — most of
//! the cost of a small counter file. A file that fails to read (an
//! interface that went away) is closed and opened anew once — unless the
//! driver answered that it cannot say (EINVAL, a virtual link's speed),
//! which it will answer again; the set of open files is bounded.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Files kept open at most; past it, all are closed and the count starts
/// again (interfaces and namespaces come and go over a long run).
const MAX_OPEN: usize = 256;
/// The longest text read from one file.
const MAX_TEXT: usize = 4 << 20;

static OPEN: Mutex<Option<HashMap<PathBuf, File>>> = Mutex::new(None);

/// The text of a live /proc or /sys file, through a file kept open.
pub(super) fn read(path: &Path) -> Option<String> {
    let mut guard = OPEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let files = guard.get_or_insert_with(HashMap::new);
    // A sysfs attribute is at most a page, given whole by one read.
    let one_read = path.starts_with("/sys");
    if let Some(file) = files.get(path) {
        match read_from_start(file, one_read) {
            Ok(text) => return String::from_utf8(text).ok(),
            // The driver cannot say (the speed of a virtual link): it will
            // not say next time either; keep the file.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return None,
            Err(_) => {
                files.remove(path);
            }
        }
    }
    let file = File::open(path).ok()?;
    let text = read_from_start(&file, one_read);
    if files.len() >= MAX_OPEN {
        files.clear();
    }
    files.insert(path.to_path_buf(), file);
    String::from_utf8(text.ok()?).ok()
}

/// Reads a whole file from offset 0, whatever was read before; with
/// `one_read`, a read shorter than asked for is the end (no second read to
/// find it).
fn read_from_start(file: &File, one_read: bool) -> std::io::Result<Vec<u8>> {
    let mut text = Vec::with_capacity(4096);
    let mut chunk = [0u8; 16384];
    loop {
        let n = file.read_at(&mut chunk, text.len() as u64)?;
        if n == 0 {
            return Ok(text);
        }
        text.extend_from_slice(&chunk[..n]);
        if one_read && n < chunk.len() {
            return Ok(text);
        }
        if text.len() > MAX_TEXT {
            return Err(std::io::ErrorKind::FileTooLarge.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_file_reads_fresh_text_each_time() {
        // The uptime moves between two reads of one kept file (it counts
        // in hundredths): the kernel wrote the text afresh; both are whole.
        let path = Path::new("/proc/uptime");
        let first = read(path).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let second = read(path).unwrap();
        assert!(first.ends_with('\n') && second.ends_with('\n'));
        assert_ne!(first, second, "the second read is the file's new text");
        assert_eq!(read(path).map(|t| t.split(' ').count()), Some(2));
        assert!(read(Path::new("/proc/no-such-file")).is_none());
    }
}
