//! The identity of a text: its lower-case hex SHA-256, as a spec, a result's spec and an audit record name it.

use sha2::{Digest, Sha256};

/// Lower-case hex SHA-256 of a text (64 characters): the identity of a canonical spec.
pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_test_vector() {
        // FIPS 180-2, "abc".
        assert_eq!(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
