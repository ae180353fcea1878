//! A stable 64-bit digest (FNV-1a) of what a process is started with, and of the part of
//! config.json the processes read: the same bytes give the same digest in every build of
//! fhircluster, which `std`'s hasher does not promise, since an in-place upgrade carries the
//! digests to a new binary (`upgrade/state.rs`) that compares them with its own. Not for
//! anything an adversary chooses to collide: a collision would only skip one restart.

use serde_json::Value;

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// Fed piece by piece; each piece ends with its length, so `["ab", "c"]` and `["a", "bc"]`
/// differ.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Digest(u64);

impl Default for Digest {
    fn default() -> Self {
        Digest(OFFSET)
    }
}

impl Digest {
    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(PRIME);
        }
    }

    /// One piece, delimited by its length.
    pub(crate) fn piece(&mut self, bytes: &[u8]) -> &mut Self {
        self.bytes(bytes);
        self.bytes(&(bytes.len() as u64).to_le_bytes());
        self
    }

    /// A JSON value, its object keys in sorted order whatever order the map keeps them in.
    pub(crate) fn json(&mut self, v: &Value) -> &mut Self {
        match v {
            Value::Null => self.piece(b"n"),
            Value::Bool(b) => self.piece(if *b { b"t" } else { b"f" }),
            Value::Number(n) => self.piece(b"#").piece(n.to_string().as_bytes()),
            Value::String(s) => self.piece(b"s").piece(s.as_bytes()),
            Value::Array(items) => {
                self.piece(b"[").piece(&(items.len() as u64).to_le_bytes());
                for item in items {
                    self.json(item);
                }
                self
            }
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                self.piece(b"{").piece(&(keys.len() as u64).to_le_bytes());
                for k in keys {
                    self.piece(k.as_bytes()).json(&map[k]);
                }
                self
            }
        }
    }

    pub(crate) fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn of(v: &Value) -> u64 {
        Digest::default().json(v).finish()
    }

    #[test]
    fn the_digest_is_fixed_across_builds_and_blind_to_key_order() {
        // A value written down: a build whose digest differs would restart every process
        // after an in-place upgrade to it.
        assert_eq!(
            Digest::default().piece(b"node").finish(),
            0x3243_2589_a75a_71c9
        );
        assert_eq!(
            of(&json!({"a": 1, "b": [true, null]})),
            of(&json!({"b": [true, null], "a": 1}))
        );
        assert_ne!(of(&json!({"a": 1})), of(&json!({"a": "1"})));
        assert_ne!(of(&json!(["ab", "c"])), of(&json!(["a", "bc"])));
        assert_ne!(of(&json!({"a": {"b": 1}})), of(&json!({"a": {"b": 2}})));
    }
}
