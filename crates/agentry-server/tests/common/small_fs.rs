//! A small file system of one test's own, mounted on a temporary folder, for the faults of a
//! disk: a tmpfs of a few megabytes that the test fills up (and empties again), or a
//! loop-mounted ext4 image whose files the test makes read-only with the immutable attribute
//! (`chattr +i`: ext4 then refuses every write, also through descriptors already open, with
//! `EPERM`; tmpfs does not enforce it on open files). Both need root (mount); the constructors
//! say why when they cannot.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct SmallFs {
    /// The mount point: the folder the test's files live in.
    pub dir: PathBuf,
    /// The ext4 image behind a loop mount.
    image: Option<PathBuf>,
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn mount_point(prefix: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("mount point");
    dir
}

impl SmallFs {
    /// A tmpfs of `size` (`mount -t tmpfs -o size=...`, such as `8m`).
    pub fn tmpfs(size: &str) -> Result<SmallFs, String> {
        let dir = mount_point("agentry-tmpfs");
        let mounted = run(Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={size},mode=0777"))
            .arg("tmpfs")
            .arg(&dir));
        if let Err(e) = mounted {
            let _ = std::fs::remove_dir(&dir);
            return Err(e);
        }
        Ok(SmallFs { dir, image: None })
    }

    /// An ext4 file system of `megabytes` in an image file, loop-mounted.
    pub fn ext4(megabytes: u64) -> Result<SmallFs, String> {
        let dir = mount_point("agentry-ext4");
        let image = dir.with_extension("img");
        let made = std::fs::File::create(&image)
            .and_then(|f| f.set_len(megabytes << 20))
            .map_err(|e| format!("{}: {e}", image.display()))
            .and_then(|()| run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image)))
            .and_then(|()| {
                run(Command::new("mount")
                    .args(["-o", "loop"])
                    .arg(&image)
                    .arg(&dir))
            });
        if let Err(e) = made {
            let _ = std::fs::remove_dir(&dir);
            let _ = std::fs::remove_file(&image);
            return Err(e);
        }
        Ok(SmallFs {
            dir,
            image: Some(image),
        })
    }

    fn filler(&self) -> PathBuf {
        self.dir.join("filler")
    }

    /// Fills the file system: a file grows until the disk refuses (`ENOSPC`). Returns how many
    /// bytes it took.
    pub fn fill(&self) -> u64 {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.filler())
            .expect("the filler file");
        let chunk = vec![0x5a_u8; 4096];
        let mut written = 0;
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
                Err(e) => panic!("filling {}: {e}", self.dir.display()),
            }
        }
        let _ = f.sync_all();
        written
    }

    /// Gives the space of [`fill`](Self::fill) back.
    pub fn free(&self) {
        std::fs::remove_file(self.filler()).expect("remove the filler file");
    }

    /// Whether a new file can be written in the folder now.
    pub fn writable(&self) -> bool {
        let probe = self.dir.join("probe");
        let ok = std::fs::write(&probe, b"x").is_ok();
        let _ = std::fs::remove_file(&probe);
        ok
    }

    /// Sets (`on`) or clears the immutable attribute of `paths` (on ext4, a write through an
    /// open descriptor then fails too).
    pub fn immutable(&self, paths: &[&Path], on: bool) {
        let flag = if on { "+i" } else { "-i" };
        for p in paths {
            run(Command::new("chattr").arg(flag).arg(p)).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        // An attribute left set would make the folder impossible to remove.
        let _ = Command::new("chattr")
            .arg("-R")
            .arg("-i")
            .arg(&self.dir)
            .output();
        if run(Command::new("umount").arg(&self.dir)).is_err() {
            // Still busy (a process the test could not stop): detach it now, freed when closed.
            let _ = run(Command::new("umount").arg("-l").arg(&self.dir));
        }
        let _ = std::fs::remove_dir(&self.dir);
        if let Some(image) = &self.image {
            let _ = std::fs::remove_file(image);
        }
    }
}
