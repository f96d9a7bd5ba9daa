//! Connection secrets at rest: every connection is stored sealed with
//! XChaCha20-Poly1305 under a key kept apart from the catalog, so a catalog
//! file copied off the machine without the key reveals no password, token or
//! private key.
//!
//! The key file holds 32 random bytes as 64 hex digits (`openssl rand -hex 32`
//! makes one). Each sealed value names the key it was sealed under by the
//! key's id (a digest, never the key), so a wrong key file is an error that
//! says so rather than garbage. A rotation writes the new key beside the old
//! one (`<key file>.next`), reseals everything under it in one catalog
//! transaction, then renames it over the old: a rotation cut short by a crash
//! is finished at the next start, whichever step it reached.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

const PREFIX: &str = "sealed:v1:";
const NONCE_LEN: usize = 24;

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("the secret key file {path}: {message}")]
    KeyFile { path: PathBuf, message: String },
    #[error(
        "{what} is sealed under secret key {found}, but this server holds key {held} ({path}): start it with \
         --secret-key-file naming the key it was sealed under"
    )]
    WrongKey { what: String, found: String, held: String, path: PathBuf },
    #[error("{what} cannot be unsealed: it was altered, or sealed for another place in the catalog")]
    Tampered { what: String },
}

/// One key: its bytes (wiped on drop) and its public id.
pub struct SecretKey {
    bytes: Zeroizing<[u8; 32]>,
    id: String,
}

impl SecretKey {
    pub fn generate() -> Self {
        let mut bytes = Zeroizing::new([0u8; 32]);
        getrandom::fill(bytes.as_mut()).expect("the operating system's random source");
        Self::from_bytes(bytes)
    }

    fn from_bytes(bytes: Zeroizing<[u8; 32]>) -> Self {
        let digest = Sha256::new().chain_update(b"weir secret key id\0").chain_update(bytes.as_ref()).finalize();
        Self { id: hex::encode(&digest[..4]), bytes }
    }

    /// The key's public id: names it in sealed values and messages.
    pub fn id(&self) -> &str {
        &self.id
    }

    fn read(path: &Path) -> Result<Self, SecretError> {
        let err = |message: String| SecretError::KeyFile { path: path.to_path_buf(), message };
        let text = Zeroizing::new(std::fs::read_to_string(path).map_err(|e| err(format!("cannot be read: {e}")))?);
        let mut bytes = Zeroizing::new([0u8; 32]);
        hex::decode_to_slice(text.trim(), bytes.as_mut())
            .map_err(|_| err("must hold 64 hex digits (32 random bytes; `openssl rand -hex 32` makes one)".into()))?;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            eprintln!(
                "weir: warning: the secret key file {} can be read by other users (mode {:o}): chmod 600 it",
                path.display(),
                meta.permissions().mode() & 0o777
            );
        }
        Ok(Self::from_bytes(bytes))
    }

    /// Writes the key to a new file at `path`, readable by its owner only and
    /// synced, unless a key is there already: then it returns false and writes
    /// nothing. The file appears whole or not at all (written aside, then
    /// linked into place), so a process opening the same data directory at
    /// that moment reads this key or the one that got there first, never a part.
    fn write_new(&self, path: &Path) -> Result<bool, SecretError> {
        let err = |e: std::io::Error| SecretError::KeyFile {
            path: path.to_path_buf(),
            message: format!("cannot be written: {e} (is its directory writable?)"),
        };
        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix).expect("the operating system's random source");
        let mut aside = path.as_os_str().to_owned();
        aside.push(format!(".{}.new", hex::encode(suffix)));
        let aside = PathBuf::from(aside);
        let written = (|| {
            let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&aside)?;
            let text = Zeroizing::new(format!("{}\n", hex::encode(self.bytes.as_ref())));
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            std::fs::hard_link(&aside, path)
        })();
        let _ = std::fs::remove_file(&aside);
        match written {
            Ok(()) => sync_dir(path).map(|()| true).map_err(err),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(err(e)),
        }
    }

    fn seal(&self, aad: &str, plain: &[u8]) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).expect("the operating system's random source");
        let sealed = self
            .cipher()
            .encrypt(XNonce::from_slice(&nonce), Payload { msg: plain, aad: aad.as_bytes() })
            .expect("sealing cannot fail for in-memory data");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        format!("{PREFIX}{}:{}", self.id, URL_SAFE_NO_PAD.encode(out))
    }

    fn unseal(&self, aad: &str, body: &[u8]) -> Option<Vec<u8>> {
        if body.len() < NONCE_LEN {
            return None;
        }
        let (nonce, sealed) = body.split_at(NONCE_LEN);
        self.cipher().decrypt(XNonce::from_slice(nonce), Payload { msg: sealed, aad: aad.as_bytes() }).ok()
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(self.bytes.as_ref().into())
    }
}

fn sync_dir(path: &Path) -> std::io::Result<()> {
    std::fs::File::open(path.parent().unwrap_or(Path::new(".")))?.sync_all()
}

/// Where the key lives when no `--secret-key-file` is given.
pub fn default_key_file(data_dir: &Path) -> PathBuf {
    data_dir.join("secret.key")
}

fn next_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".next");
    PathBuf::from(name)
}

/// The key values are sealed under, and during a rotation the one replacing it.
pub struct Keyring {
    path: PathBuf,
    current: SecretKey,
    next: Option<SecretKey>,
}

impl Keyring {
    /// Reads the key file, or when there is none and `generate` says so,
    /// generates it (mode 0600); `true`: it was generated now. A `<key
    /// file>.next` left by a rotation cut short is read too, for
    /// `Catalog::open_with_key` to finish.
    pub fn open(path: &Path, generate: bool) -> Result<(Self, bool), SecretError> {
        let (current, generated) = if path.exists() {
            (SecretKey::read(path)?, false)
        } else if !generate {
            return Err(SecretError::KeyFile {
                path: path.to_path_buf(),
                message: "does not exist: make one with `(umask 077; openssl rand -hex 32 > FILE)`, or leave \
                          --secret-key-file out to use one generated in the data directory"
                    .into(),
            });
        } else {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| SecretError::KeyFile {
                    path: path.to_path_buf(),
                    message: format!("its directory cannot be created: {e}"),
                })?;
            }
            let key = SecretKey::generate();
            match key.write_new(path)? {
                true => (key, true),
                false => (SecretKey::read(path)?, false),
            }
        };
        let next_path = next_path(path);
        let next = if next_path.exists() { Some(SecretKey::read(&next_path)?) } else { None };
        Ok((Self { path: path.to_path_buf(), current, next }, generated))
    }

    /// The id of the key new values are sealed under.
    pub fn key_id(&self) -> &str {
        self.target().id()
    }

    /// A rotation is under way: values are being moved to the next key.
    pub fn rotating(&self) -> bool {
        self.next.is_some()
    }

    fn target(&self) -> &SecretKey {
        self.next.as_ref().unwrap_or(&self.current)
    }

    /// Seals `plain` for one place in the catalog (`aad` names it, so a sealed
    /// value moved elsewhere does not unseal).
    pub fn seal(&self, aad: &str, plain: &[u8]) -> String {
        self.target().seal(aad, plain)
    }

    /// Whether a stored value is sealed under the key new values go under.
    pub fn sealed_under_target(&self, stored: &str) -> bool {
        stored.strip_prefix(PREFIX).and_then(|rest| rest.split_once(':')).is_some_and(|(id, _)| id == self.key_id())
    }

    /// Unseals a stored value; one that is not sealed (written by a weir
    /// before sealing) is returned as it is. `what` names it in errors.
    pub fn unseal(&self, what: &str, aad: &str, stored: &str) -> Result<Zeroizing<Vec<u8>>, SecretError> {
        let Some(rest) = stored.strip_prefix(PREFIX) else {
            return Ok(Zeroizing::new(stored.as_bytes().to_vec()));
        };
        let tampered = || SecretError::Tampered { what: what.into() };
        let (id, body) = rest.split_once(':').ok_or_else(tampered)?;
        let key = [Some(&self.current), self.next.as_ref()].into_iter().flatten().find(|k| k.id() == id).ok_or_else(
            || SecretError::WrongKey {
                what: what.into(),
                found: id.into(),
                held: self.current.id().into(),
                path: self.path.clone(),
            },
        )?;
        let body = URL_SAFE_NO_PAD.decode(body).map_err(|_| tampered())?;
        key.unseal(aad, &body).map(Zeroizing::new).ok_or_else(tampered)
    }

    /// Starts a rotation: a new key, written to `<key file>.next`. Values
    /// sealed from now on go under it.
    pub fn begin_rotation(&mut self) -> Result<(), SecretError> {
        if self.next.is_none() {
            let key = SecretKey::generate();
            let next = next_path(&self.path);
            self.next = Some(if key.write_new(&next)? { key } else { SecretKey::read(&next)? });
        }
        Ok(())
    }

    /// Ends a rotation once every value is sealed under the next key: it
    /// replaces the old key file. Returns the retired key's id.
    pub fn finish_rotation(&mut self) -> Result<Option<String>, SecretError> {
        let Some(next) = self.next.take() else { return Ok(None) };
        let renamed = std::fs::rename(next_path(&self.path), &self.path).and_then(|()| sync_dir(&self.path));
        if let Err(e) = renamed {
            self.next = Some(next);
            return Err(SecretError::KeyFile {
                path: self.path.clone(),
                message: format!("cannot be replaced by the new key: {e} (the next start finishes the rotation)"),
            });
        }
        let retired = std::mem::replace(&mut self.current, next);
        Ok(Some(retired.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Processes opening a new data directory at once all end up with the key
    /// one of them wrote, whole: none fails, none reads it half written.
    #[test]
    fn a_key_generated_by_several_at_once_is_one_key() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("secret.key");
            let barrier = std::sync::Barrier::new(4);
            let opened: Vec<(String, bool)> = std::thread::scope(|s| {
                let opening: Vec<_> = (0..4)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            let (ring, generated) = Keyring::open(&path, true).unwrap();
                            (ring.key_id().to_string(), generated)
                        })
                    })
                    .collect();
                opening.into_iter().map(|o| o.join().unwrap()).collect()
            });
            assert!(opened.iter().all(|(id, _)| *id == opened[0].0), "one key: {opened:?}");
            assert_eq!(opened.iter().filter(|(_, generated)| *generated).count(), 1, "{opened:?}");
            let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(names, ["secret.key"], "nothing left aside");
        }
    }

    #[test]
    fn seals_and_unseals_under_its_place_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let (ring, generated) = Keyring::open(&dir.path().join("k"), true).unwrap();
        assert!(generated);
        let mode = std::fs::metadata(dir.path().join("k")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let sealed = ring.seal("a/b", b"hunter2");
        assert!(!sealed.contains("hunter2"));
        assert_eq!(&ring.unseal("x", "a/b", &sealed).unwrap()[..], b"hunter2");
        assert!(matches!(ring.unseal("x", "a/c", &sealed), Err(SecretError::Tampered { .. })));
        // Values from before sealing pass through.
        assert_eq!(&ring.unseal("x", "a/b", "{\"a\":1}").unwrap()[..], b"{\"a\":1}");

        // Another key: the error names both ids.
        let (other, _) = Keyring::open(&dir.path().join("other"), true).unwrap();
        let err = other.unseal("the connection of a/b", "a/b", &sealed).unwrap_err().to_string();
        assert!(err.contains(ring.key_id()) && err.contains(other.key_id()), "{err}");

        // The same file read again is the same key.
        let (again, generated) = Keyring::open(&dir.path().join("k"), true).unwrap();
        assert!(!generated);
        assert_eq!(again.key_id(), ring.key_id());
    }

    #[test]
    fn a_rotation_moves_to_the_next_key_and_survives_being_cut_short() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let (mut ring, _) = Keyring::open(&path, true).unwrap();
        let old = ring.seal("p", b"s");
        let old_id = ring.key_id().to_string();
        ring.begin_rotation().unwrap();
        let new = ring.seal("p", b"s");
        assert!(ring.sealed_under_target(&new) && !ring.sealed_under_target(&old));

        // Cut short here: a restart holds both keys.
        let (reopened, _) = Keyring::open(&path, true).unwrap();
        assert!(reopened.rotating());
        assert_eq!(&reopened.unseal("v", "p", &old).unwrap()[..], b"s");
        assert_eq!(&reopened.unseal("v", "p", &new).unwrap()[..], b"s");

        assert_eq!(ring.finish_rotation().unwrap().as_deref(), Some(old_id.as_str()));
        assert!(!next_path(&path).exists());
        let (after, _) = Keyring::open(&path, true).unwrap();
        assert_ne!(after.key_id(), old_id);
        assert_eq!(&after.unseal("v", "p", &new).unwrap()[..], b"s");
        assert!(matches!(after.unseal("v", "p", &old), Err(SecretError::WrongKey { .. })));
    }

    #[test]
    fn a_key_file_that_is_not_a_key_says_what_it_must_hold() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        std::fs::write(&path, "not a key").unwrap();
        let err = Keyring::open(&path, true).err().unwrap().to_string();
        assert!(err.contains("64 hex digits"), "{err}");
    }
}
