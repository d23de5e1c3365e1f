//! How the server's messages name its settings: an answer that hits a limit says which one,
//! and a start that fails says what to change. The library names them by their fields in
//! [`super::ServeSettings`]; the `transformer` binary passes its flags' names.

/// Each setting's name, as its messages write it.
#[derive(Debug, Clone, Copy)]
pub struct ServeSettingNames {
    pub max_body_bytes: &'static str,
    pub max_chars: &'static str,
    pub max_texts: &'static str,
    pub max_request_tokens: &'static str,
    /// The batcher's queue capacity.
    pub max_queue: &'static str,
    pub timeout: &'static str,
    pub file_timeout: &'static str,
    pub max_file_bytes: &'static str,
    pub max_file_chars: &'static str,
    pub max_connections: &'static str,
    pub api_key: &'static str,
    pub files_dir: &'static str,
    /// What turns `/translate_file` off.
    pub files_off: &'static str,
    /// What picks the address listened on.
    pub address: &'static str,
    /// What names the languages a checkpoint does not name.
    pub languages: &'static str,
}

impl ServeSettingNames {
    /// The names of [`super::ServeSettings`]'s fields.
    pub const FIELDS: Self = Self {
        max_body_bytes: "limits.max_body_bytes",
        max_chars: "limits.max_chars",
        max_texts: "limits.max_texts",
        max_request_tokens: "limits.max_request_tokens",
        max_queue: "policy.capacity",
        timeout: "limits.timeout",
        file_timeout: "files.timeout",
        max_file_bytes: "files.max_file_bytes",
        max_file_chars: "files.max_file_chars",
        max_connections: "connections.max_connections",
        api_key: "api_key",
        files_dir: "files.dir",
        files_off: "files = None",
        address: "another addr",
        languages: "the languages (Translator::name_languages)",
    };
}

impl Default for ServeSettingNames {
    fn default() -> Self {
        Self::FIELDS
    }
}
