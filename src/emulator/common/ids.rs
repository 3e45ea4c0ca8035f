//! Identifiers the API makes: UUIDs, slugs and one-time secrets.

pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Six random lowercase hex digits, the suffix of generated slugs.
pub fn hex6() -> String {
    format!("{:06x}", rand::random::<u32>() & 0x00ff_ffff)
}

/// Random lowercase hex of `bytes` bytes, for one-time secrets.
pub fn random_hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

/// `<prefix>-<first six characters of the name, dashed>-<6 hex>`, like `pc-pplx-c-ca7a87`.
pub fn make_slug(prefix: &str, name: &str) -> String {
    let stem: String = name
        .to_lowercase()
        .chars()
        .take(6)
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let stem = stem.trim_matches('-');
    let stem = if stem.is_empty() { prefix } else { stem };
    format!("{prefix}-{stem}-{}", hex6())
}

/// `<name, dashed, up to 40 characters>-<6 hex>` (`fallback` for a name with nothing to keep),
/// drawn again while `taken` says another object has it: integration and provider slugs.
pub fn free_slug(name: &str, fallback: &str, taken: impl Fn(&str) -> bool) -> String {
    let stem: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    let stem = stem.trim_matches('-');
    let stem = if stem.is_empty() { fallback } else { stem };
    loop {
        let slug = format!("{stem}-{}", hex6());
        if !taken(&slug) {
            return slug;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slug_takes_six_name_characters() {
        let slug = make_slug("pc", "Pplx Cache Test");
        assert!(slug.starts_with("pc-pplx-c-"), "{slug}");
        assert_eq!(slug.len(), "pc-pplx-c-".len() + 6);
        assert!(make_slug("dp", "!!!").starts_with("dp-dp-"));
    }
}
