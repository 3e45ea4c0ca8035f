//! The key of every Secret-derived hash the operator writes (`status.secretHash`,
//! `createAttempt.bodyHash`, the create intent's body hash): HMAC-SHA256, so that someone who
//! can read the object (its uid and spec) cannot test guesses of a short Secret value offline.
//!
//! The key is 32 random bytes in the Secret [`SECRET_NAME`] of the operator's own namespace,
//! created by the first operator that finds none; replicas and restarts read the same one.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use ring::rand::SecureRandom;

/// The Secret holding the key, in the operator's own namespace.
pub const SECRET_NAME: &str = "aigw-hash-key";
/// The Secret's data key holding the 32 key bytes.
pub const DATA_KEY: &str = "key";
/// What every keyed hash starts with. A hash without it (the unkeyed SHA-256 of an earlier
/// release) never equals a new one: it reads as "changed", once.
pub const PREFIX: &str = "hmac-sha256:";

const KEY_LEN: usize = 32;

/// An HMAC-SHA256 key. Its `Debug` never shows the key.
#[derive(Clone)]
pub struct HashKey(ring::hmac::Key);

impl std::fmt::Debug for HashKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HashKey(..)")
    }
}

impl HashKey {
    /// A key from its bytes.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        Self(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, bytes))
    }

    /// A fresh random key, kept only in memory.
    pub fn random() -> Self {
        Self::from_bytes(&random_bytes())
    }

    /// HMAC-SHA256 over `parts`, each preceded by its length so that no two splits of the
    /// same bytes hash alike; hex-encoded, with [`PREFIX`].
    pub fn hash<'a>(&self, parts: impl IntoIterator<Item = &'a [u8]>) -> String {
        let mut context = ring::hmac::Context::with_key(&self.0);
        for part in parts {
            context.update(&(part.len() as u64).to_be_bytes());
            context.update(part);
        }
        format!("{PREFIX}{}", hex(context.sign().as_ref()))
    }
}

/// `bytes` as lower-case hex: how a hash is written, keyed ([`HashKey::hash`]) or the unkeyed
/// SHA-256 of an earlier release.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn random_bytes() -> [u8; KEY_LEN] {
    let mut bytes = [0u8; KEY_LEN];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system's random number generator failed");
    bytes
}

/// The key in the Secret [`SECRET_NAME`] of `namespace`. Absent, it is created with a random
/// key; creating is the precondition, so when another replica created it first (409) its key
/// is read and both agree. A dry run creates nothing: without the Secret (or without the right
/// to read it) it uses a random key kept in memory, and says so.
pub async fn load(kube: &kube::Client, namespace: &str, dry_run: bool) -> Result<HashKey, String> {
    let api: Api<Secret> = Api::namespaced(kube.clone(), namespace);
    let whose = format!("Secret {namespace}/{SECRET_NAME}");
    let found = api.get_opt(SECRET_NAME).await;
    if dry_run {
        if let Ok(Some(secret)) = &found {
            return key_of(secret, &whose);
        }
        tracing::info!(
            secret = %whose,
            "dry run: no readable hash key Secret, and a dry run creates none; hashes use a key \
             kept in memory, so every recorded Secret hash reads as changed"
        );
        return Ok(HashKey::random());
    }
    let found = found.map_err(|e| format!("read {whose} (the hash key): {e}"))?;
    if let Some(secret) = found {
        return key_of(&secret, &whose);
    }
    let bytes = random_bytes();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(SECRET_NAME.to_string()),
            labels: Some([("app.kubernetes.io/part-of".to_string(), "aigw".to_string())].into()),
            ..Default::default()
        },
        type_: Some("Opaque".to_string()),
        immutable: Some(true),
        data: Some([(DATA_KEY.to_string(), ByteString(bytes.to_vec()))].into()),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(secret = %whose, "created the hash key Secret");
            Ok(HashKey::from_bytes(&bytes))
        }
        Err(kube::Error::Api(e)) if e.code == 409 => {
            // Another replica created it first: its key is the one.
            let secret = api
                .get(SECRET_NAME)
                .await
                .map_err(|e| format!("read {whose} (the hash key): {e}"))?;
            key_of(&secret, &whose)
        }
        Err(e) => Err(concealed_key(
            &format!("create {whose} (the hash key): {e}"),
            &bytes,
        )),
    }
}

/// `message` with the key `bytes` concealed, as the apiserver would quote it: base64, as a
/// Secret's data is written (an admission check refusing the Secret may quote its data).
fn concealed_key(message: &str, bytes: &[u8]) -> String {
    use base64::Engine as _;
    let encoded = [
        base64::engine::general_purpose::STANDARD.encode(bytes),
        base64::engine::general_purpose::URL_SAFE.encode(bytes),
    ];
    crate::api::concealment::conceal(message, &encoded)
}

fn key_of(secret: &Secret, whose: &str) -> Result<HashKey, String> {
    match secret.data.as_ref().and_then(|d| d.get(DATA_KEY)) {
        Some(ByteString(bytes)) if bytes.len() >= KEY_LEN => Ok(HashKey::from_bytes(bytes)),
        Some(_) => Err(format!(
            "key {DATA_KEY} of {whose} (the hash key) is shorter than {KEY_LEN} bytes"
        )),
        None => Err(format!("{whose} (the hash key) has no key {DATA_KEY}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_quoting_the_key_does_not_show_it() {
        use base64::Engine as _;
        let bytes = random_bytes();
        let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
        let refusal = format!(
            "create Secret aigw/aigw-hash-key (the hash key): ApiError: secrets \"aigw-hash-key\" \
             is forbidden: refused secret with data key={encoded} (Forbidden)"
        );
        let shown = concealed_key(&refusal, &bytes);
        assert!(!shown.contains(&encoded), "{shown}");
        assert!(!shown.contains(&encoded[..16]), "{shown}");
        assert!(shown.contains("is forbidden"), "{shown}");
    }

    #[test]
    fn a_hash_depends_on_the_key_and_on_how_the_parts_split() {
        let one = HashKey::from_bytes(&[1; KEY_LEN]);
        let two = HashKey::from_bytes(&[2; KEY_LEN]);
        let parts = || [b"uid".as_slice(), b"/pw=Summer2025!".as_slice()];
        assert!(one.hash(parts()).starts_with(PREFIX));
        assert_eq!(one.hash(parts()), one.clone().hash(parts()));
        assert_ne!(one.hash(parts()), two.hash(parts()));
        assert_ne!(
            one.hash(parts()),
            one.hash([b"uid/".as_slice(), b"pw=Summer2025!".as_slice()])
        );
        assert_eq!(format!("{one:?}"), "HashKey(..)");
    }
}
