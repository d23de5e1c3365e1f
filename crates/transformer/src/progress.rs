//! How the library tells its caller about a long pass over data (reading a corpus, learning a
//! tokenizer, encoding): through an observer the caller hands in. The library draws nothing;
//! the `transformer` binary shows the passes as indicatif bars, and a library user who wants
//! no display passes [`Silent`].

/// Receives the start of every long pass over data.
pub trait Progress: Send + Sync {
    /// A pass labelled `what` over `total` bytes begins; `read` says how many bytes of them are
    /// read so far, and may be called from any thread. The pass ends when the handle drops.
    fn data_pass(&self, what: &str, total: u64, read: BytesRead) -> Box<dyn DataPass>;
}

/// The bytes a pass has read so far.
pub type BytesRead = Box<dyn Fn() -> u64 + Send + 'static>;

/// One pass in flight, as its observer follows it.
pub trait DataPass {
    /// Says what the pass does now (after the reading, say).
    fn set_message(&self, what: &str);
}

/// Shows nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {
    fn data_pass(&self, _what: &str, _total: u64, _read: BytesRead) -> Box<dyn DataPass> {
        Box::new(Silent)
    }
}

impl DataPass for Silent {
    fn set_message(&self, _what: &str) {}
}
