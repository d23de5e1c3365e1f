//! `--api-key`: the one key a client must send, compared in constant time so that response
//! times do not reveal how much of a guess was right.

use subtle::ConstantTimeEq;

use super::error::ApiError;

/// The key requests must carry, when the server was started with one.
#[derive(Clone)]
pub struct ApiKey(Option<Vec<u8>>);

impl ApiKey {
    pub fn new(key: Option<String>) -> Self {
        Self(key.map(String::into_bytes))
    }

    pub fn required(&self) -> bool {
        self.0.is_some()
    }

    /// Accepts `given` when no key is required or when it equals the key. (Only the length of
    /// the key can be learnt from timing: comparing slices of different lengths stops early.)
    pub fn check(&self, given: Option<&str>) -> Result<(), ApiError> {
        let Some(key) = &self.0 else { return Ok(()) };
        match given {
            Some(given) if bool::from(key.as_slice().ct_eq(given.as_bytes())) => Ok(()),
            Some(_) => Err(ApiError::forbidden(
                "invalid API key; send the key the server was started with (serve --api-key) \
                 as api_key",
            )),
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
        assert!(ApiKey::new(None).check(None).is_ok());
        assert!(ApiKey::new(None).check(Some("anything")).is_ok());
    }

    #[test]
    fn a_key_accepts_only_itself() {
        let key = ApiKey::new(Some("s3cret".into()));
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
