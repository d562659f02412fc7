//! Tokens: random secrets shown once, stored as SHA-256 hashes. A token is
//! 32 random bytes, so a fast hash is enough: there is nothing to brute-force.

use rand::Rng;
use sha2::{Digest, Sha256};

pub const TOKEN_PREFIX: &str = "pad_";

pub fn new_token() -> String {
    format!("{TOKEN_PREFIX}{}", random_hex::<32>())
}

/// `N` random bytes as lowercase hex: the one source of pad's secrets and
/// nonces (tokens, webhook secrets, markdown's task markers).
pub fn random_hex<const N: usize>() -> String {
    let mut bytes = [0u8; N];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_hashes_stable() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() == 68);
        assert_eq!(hash_token(&a), hash_token(&a));
        assert_ne!(hash_token(&a), hash_token(&b));
        assert!(!hash_token(&a).contains(&a[4..]));
    }
}
