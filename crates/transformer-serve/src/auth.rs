//! The API key: the one key a client must send, compared in constant time so that response
//! times do not reveal how much of a guess was right.

use subtle::ConstantTimeEq;

use super::error::ApiError;

/// The key requests must carry, when the server was started with one, and the name of the
/// setting that gave it, for the answer to a wrong key.
#[derive(Clone)]
pub struct ApiKey {
    key: Option<Vec<u8>>,
    setting: &'static str,
}

impl ApiKey {
    pub fn new(key: Option<String>, setting: &'static str) -> Self {
        Self {
            key: key.map(String::into_bytes),
            setting,
        }
    }

    pub fn required(&self) -> bool {
        self.key.is_some()
    }

    /// Accepts `given` when no key is required or when it equals the key. (Only the length of
    /// the key can be learnt from timing: comparing slices of different lengths stops early.)
    pub fn check(&self, given: Option<&str>) -> Result<(), ApiError> {
        let Some(key) = &self.key else { return Ok(()) };
        match given {
            Some(given) if bool::from(key.as_slice().ct_eq(given.as_bytes())) => Ok(()),
            Some(_) => Err(ApiError::forbidden(format!(
                "invalid API key; send the key the server was started with ({}) as api_key",
                self.setting
            ))),
            None => Err(ApiError::forbidden(
                "this server requires an API key; send it as api_key (or an Authorization: \
                 Bearer header on /v1)",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_without_a_key_accepts_every_request() {
        assert!(ApiKey::new(None, "api_key").check(None).is_ok());
        assert!(ApiKey::new(None, "api_key").check(Some("anything")).is_ok());
    }

    #[test]
    fn a_key_accepts_only_itself() {
        let key = ApiKey::new(Some("s3cret".into()), "api_key");
        assert!(key.check(Some("s3cret")).is_ok());
        for wrong in [
            None,
            Some(""),
            Some("s3cre"),
            Some("s3cret!"),
            Some("S3CRET"),
        ] {
            assert_eq!(key.check(wrong).unwrap_err().status, 403, "{wrong:?}");
        }
    }
}
