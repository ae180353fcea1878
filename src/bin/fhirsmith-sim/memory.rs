//! Real memory on demand (SIM-21): `POST /sim/alloc?mb=N` allocates N MiB and writes every page,
//! so `RssAnon` and the cgroup's `anon` really move; `POST /sim/free` gives it all back.

use std::sync::Mutex;

const CHUNK: usize = 1 << 20;
const PAGE: usize = 4096;

#[derive(Default)]
pub struct Ballast {
    chunks: Mutex<Vec<Vec<u8>>>,
}

impl Ballast {
    /// Allocates and touches `mb` MiB more; returns the total held, bytes.
    pub fn alloc(&self, mb: u64) -> u64 {
        let mut new = Vec::new();
        for _ in 0..mb {
            let mut chunk = vec![0u8; CHUNK];
            // A zeroed allocation may be untouched fresh pages: write one byte in each.
            for i in (0..CHUNK).step_by(PAGE) {
                chunk[i] = 1;
            }
            new.push(chunk);
        }
        let mut chunks = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
        chunks.extend(new);
        (chunks.len() * CHUNK) as u64
    }

    /// Frees everything and asks the allocator to return it to the system.
    pub fn free(&self) {
        let old = std::mem::take(&mut *self.chunks.lock().unwrap_or_else(|e| e.into_inner()));
        drop(old);
        // Without it, freed 1 MiB chunks below the dynamic mmap threshold stay resident.
        fhircluster::system::ffi::malloc_trim();
    }

    pub fn held(&self) -> u64 {
        (self.chunks.lock().unwrap_or_else(|e| e.into_inner()).len() * CHUNK) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_and_free_count_bytes() {
        let b = Ballast::default();
        assert_eq!(b.alloc(2), 2 * CHUNK as u64);
        assert_eq!(b.alloc(1), 3 * CHUNK as u64);
        b.free();
        assert_eq!(b.held(), 0);
    }
}
