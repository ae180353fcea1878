//! Where `$cache-control` caches live. Without `sharedCache`, in this process's memory: a restart
//! loses them. With it (SIM-8), in a directory under `<data dir>/databases/` that every process
//! reads and writes: a `generation` file (base 36, set by each master start, which so turns every
//! older cache into a tombstone) and one file per cache-id holding the generation it was issued
//! in. The real server uses SQLite; files are enough for a simulation.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

use super::cache_id::{self, Verdict};

pub enum CacheStore {
    Local {
        code: String,
        start: u64,
        issued: HashSet<String>,
    },
    Shared {
        code: String,
        dir: PathBuf,
    },
}

impl CacheStore {
    pub fn local(code: &str, start: u64) -> CacheStore {
        CacheStore::Local {
            code: code.to_string(),
            start,
            issued: HashSet::new(),
        }
    }

    /// The shared store; a master start (`is_master`) begins a new generation, tombstoning every
    /// live cache. A worker that finds no generation yet starts one at its own start.
    pub fn shared(
        data_dir: &Path,
        code: &str,
        start: u64,
        is_master: bool,
    ) -> io::Result<CacheStore> {
        let dir = data_dir.join("databases").join("sim-resource-cache");
        std::fs::create_dir_all(dir.join("ids"))?;
        let store = CacheStore::Shared {
            code: code.to_string(),
            dir: dir.clone(),
        };
        let gen = dir.join("generation");
        if is_master {
            let tmp = dir.join(format!("generation.{}", std::process::id()));
            std::fs::write(&tmp, cache_id::base36(start))?;
            std::fs::rename(&tmp, &gen)?;
        } else if !gen.exists() {
            // Two workers may race here; whichever rename lands, both read it back after.
            let tmp = dir.join(format!("generation.{}", std::process::id()));
            std::fs::write(&tmp, cache_id::base36(start))?;
            std::fs::rename(&tmp, &gen)?;
        }
        Ok(store)
    }

    fn generation(dir: &Path) -> io::Result<String> {
        Ok(std::fs::read_to_string(dir.join("generation"))?
            .trim()
            .to_string())
    }

    /// Issues a new cache-id (`random`: a fresh 22-character token).
    pub fn issue(&mut self, random: &str) -> io::Result<String> {
        match self {
            CacheStore::Local {
                code,
                start,
                issued,
            } => {
                let id = cache_id::format(code, *start, random);
                issued.insert(id.clone());
                Ok(id)
            }
            CacheStore::Shared { code, dir } => {
                let gen = Self::generation(dir)?;
                let id = format!("{code}.{gen}.{random}");
                std::fs::write(dir.join("ids").join(&id), &gen)?;
                Ok(id)
            }
        }
    }

    pub fn check(&self, id: &str) -> Verdict {
        match self {
            CacheStore::Local {
                code,
                start,
                issued,
            } => cache_id::classify_local(id, code, *start, issued),
            CacheStore::Shared { dir, .. } => {
                // Only well-formed ids reach the file system, so an id can't name another path.
                if cache_id::parse(id).is_none() {
                    return Verdict::NeverIssued;
                }
                let Ok(issued_in) = std::fs::read_to_string(dir.join("ids").join(id)) else {
                    return Verdict::NeverIssued;
                };
                match Self::generation(dir) {
                    Ok(gen) if gen == issued_in.trim() => Verdict::Live,
                    _ => Verdict::LostToRestart,
                }
            }
        }
    }

    /// Live caches: this process's, or with a shared store, everyone's (counted once).
    pub fn live_count(&self) -> u64 {
        match self {
            CacheStore::Local { issued, .. } => issued.len() as u64,
            CacheStore::Shared { dir, .. } => {
                let Ok(gen) = Self::generation(dir) else {
                    return 0;
                };
                let Ok(entries) = std::fs::read_dir(dir.join("ids")) else {
                    return 0;
                };
                entries
                    .filter_map(Result::ok)
                    .filter(|e| std::fs::read_to_string(e.path()).is_ok_and(|g| g.trim() == gen))
                    .count() as u64
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_ids_survive_a_worker_restart_and_die_with_a_master_start() -> io::Result<()> {
        // spec: SIM-8
        let dir = tempfile::tempdir()?;
        let _master = CacheStore::shared(dir.path(), "m0", 1000, true)?;
        let mut w1 = CacheStore::shared(dir.path(), "tx1", 2000, false)?;
        let id = w1.issue("aaaa")?;
        assert!(
            id.starts_with("tx1.rs."),
            "generation is the master's start: {id}"
        );
        let w1_again = CacheStore::shared(dir.path(), "tx1", 3000, false)?;
        let w2 = CacheStore::shared(dir.path(), "tx2", 2500, false)?;
        assert_eq!(w1_again.check(&id), Verdict::Live);
        assert_eq!(
            w2.check(&id),
            Verdict::Live,
            "any process answers any live id"
        );
        assert_eq!(w2.live_count(), 1);
        assert_eq!(w2.check("tx1.rs.bbbb"), Verdict::NeverIssued);
        assert_eq!(w2.check("../../etc"), Verdict::NeverIssued);
        let _master2 = CacheStore::shared(dir.path(), "m0", 4000, true)?;
        assert_eq!(w2.check(&id), Verdict::LostToRestart);
        assert_eq!(w2.live_count(), 0);
        Ok(())
    }

    #[test]
    fn local_ids_are_this_process_only() -> io::Result<()> {
        let mut s = CacheStore::local("tx1", 1000);
        let id = s.issue("abc")?;
        assert_eq!(s.check(&id), Verdict::Live);
        let restarted = CacheStore::local("tx1", 2000);
        assert_eq!(restarted.check(&id), Verdict::LostToRestart);
        Ok(())
    }
}
