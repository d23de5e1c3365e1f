//! Value parsers for numeric flags: clap names the flag and the value they refuse.

/// A whole number of at least 1, for sizes where 0 would mean no work.
pub fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a whole number")),
    }
}

/// Any finite number, negative ones included.
pub fn finite(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(format!("{text:?} is not a finite number")),
    }
}

/// A finite number of at least 0.
pub fn non_negative(text: &str) -> Result<f64, String> {
    match finite(text)? {
        x if x >= 0.0 => Ok(x),
        _ => Err("must be 0 or more".into()),
    }
}
