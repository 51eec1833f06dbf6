//! Real devices and cgroups for the probes' tests: a loop device over a
//! file in a directory of its own (on tmpfs or on the host's disk), an
//! ext4 mounted on it, a v1 blkio cgroup, and a child process placed in
//! it. Each is undone when its guard is dropped, whether the test passed
//! or not. The tests that use them run as root, as the suite does.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// Runs a command and gives its standard output, panicking with its
/// standard error: a test that cannot build its device fails loudly.
fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} cannot run ({e}): the test needs it, as root"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A directory of its own, removed with everything in it.
pub(crate) struct Dir(pub PathBuf);

impl Dir {
    /// A fresh directory under `parent` (`/dev/shm` is tmpfs; `/var/tmp`
    /// is the host's disk).
    pub(crate) fn under(parent: &str, tag: &str) -> Self {
        let path = Path::new(parent).join(format!("perflab-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("a test directory");
        Dir(path)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A loop device over a file; the file system mounted on it, if any, is
/// unmounted before the device is detached.
pub(crate) struct Loop {
    /// `/dev/loopN`.
    pub(crate) path: String,
    pub(crate) mount: Option<PathBuf>,
    pub(crate) dir: Dir,
}

impl Loop {
    /// A loop device over a file of `mib` MiB in a directory under `parent`.
    pub(crate) fn new(parent: &str, tag: &str, mib: u64) -> Self {
        let dir = Dir::under(parent, tag);
        let file = dir.0.join("backing.img");
        std::fs::File::create(&file)
            .and_then(|f| f.set_len(mib << 20))
            .expect("the backing file");
        let path = run(Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&file));
        Loop {
            path,
            mount: None,
            dir,
        }
    }

    /// `loopN`.
    pub(crate) fn name(&self) -> &str {
        self.path.trim_start_matches("/dev/")
    }

    /// `MAJ:MIN`.
    pub(crate) fn majmin(&self) -> String {
        std::fs::read_to_string(format!("/sys/block/{}/dev", self.name()))
            .expect("the loop device's number")
            .trim()
            .to_string()
    }

    /// An ext4 on the device, mounted in the test's directory.
    pub(crate) fn ext4(&mut self) -> PathBuf {
        run(Command::new("mkfs.ext4").args(["-q", "-F", &self.path]));
        let mount = self.dir.0.join("mnt");
        std::fs::create_dir_all(&mount).expect("a mount point");
        run(Command::new("mount").arg(&self.path).arg(&mount));
        self.mount = Some(mount.clone());
        mount
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        if let Some(m) = &self.mount {
            let _ = Command::new("umount").arg(m).output();
        }
        let _ = Command::new("losetup").args(["-d", &self.path]).output();
    }
}

/// A v1 blkio cgroup (`/sys/fs/cgroup/blkio/NAME`), removed when dropped
/// after its processes are ended.
pub(crate) struct Blkio {
    pub(crate) dir: PathBuf,
    /// The processes started in it.
    pub(crate) children: Vec<Child>,
}

impl Blkio {
    /// A new blkio cgroup, or a panic saying the host has no v1 blkio.
    pub(crate) fn new(tag: &str) -> Self {
        let root = Path::new("/sys/fs/cgroup/blkio");
        assert!(
            root.join("blkio.throttle.read_iops_device").exists(),
            "the test needs the cgroup v1 blkio controller at {}",
            root.display()
        );
        let dir = root.join(format!("perflab-test-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a blkio cgroup");
        Blkio {
            dir,
            children: Vec::new(),
        }
    }

    /// Writes `line` to one of its files.
    pub(crate) fn set(&self, file: &str, line: &str) {
        std::fs::write(self.dir.join(file), line)
            .unwrap_or_else(|e| panic!("writing {line:?} to {file}: {e}"));
    }

    /// Starts `sh -c SCRIPT` inside the cgroup (it moves itself in first)
    /// and gives its pid.
    pub(crate) fn spawn(&mut self, script: &str) -> u32 {
        let procs = self.dir.join("cgroup.procs");
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("echo $$ > {} && {script}", procs.display()))
            .spawn()
            .expect("sh runs");
        let pid = child.id();
        self.children.push(child);
        // Given back once it is inside (a bounded wait: it moves at once).
        for _ in 0..200 {
            let inside = std::fs::read_to_string(&procs)
                .is_ok_and(|t| t.lines().any(|l| l.trim() == pid.to_string()));
            if inside {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        pid
    }
}

impl Drop for Blkio {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        // The cgroup goes once it holds no process.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
