//! Arguments as the command line's parsers read its flags: a number or code is checked by the
//! flag's own parser, so that it is refused for the same reason, under the keyword's name.

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors::{usage, wrong_type};

/// `value` of the setting `name` read by the command line's own parser for its flag, so
/// that it is refused for the same reason.
pub fn parsed<T>(
    name: &str,
    value: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> PyResult<T> {
    parse(value).map_err(|why| usage(format!("invalid value '{value}' for {name}: {why}")))
}

/// A number argument, `None` when left out, checked by the flag's parser: an int (or
/// anything with `__index__`, as numpy's) or a float, as Python writes it.
pub fn number<T>(
    name: &str,
    value: Option<&Bound<'_, PyAny>>,
    parse: impl Fn(&str) -> Result<T, String>,
) -> PyResult<Option<T>> {
    let Some(value) = value else {
        return Ok(None);
    };
    // bool is an int in Python; beam=True is a mistake, not 1.
    let text = if value.is_instance_of::<pyo3::types::PyBool>() {
        None
    } else if value.is_instance_of::<pyo3::types::PyInt>() {
        // Any size: one too large for the flag is refused as the flag refuses it.
        Some(value.str()?.to_string())
    } else if let Ok(whole) = value.call_method0("__index__") {
        // An int of another type (numpy's): what `operator.index` gives.
        Some(whole.str()?.to_string())
    } else if value.extract::<f64>().is_ok() {
        Some(value.str()?.to_string())
    } else {
        None
    };
    match text {
        Some(text) => parsed(name, &text, parse).map(Some),
        None => Err(wrong_type(format!(
            "{name} must be a number, not {}",
            value.get_type().name()?
        ))),
    }
}

/// A seed: a whole number that fits in 64 bits.
pub fn seed(text: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .map_err(|_| format!("{text:?} is not a whole number from 0 to 18446744073709551615"))
}

/// `value` as a list of str (any sequence but a str itself), each item checked: an item that
/// is not a str is a TypeError naming it, one that is not valid Unicode a ValueError.
pub fn strings(value: &Bound<'_, PyAny>, name: &str, what: &str) -> PyResult<Vec<String>> {
    let not_a_list = || -> PyResult<PyErr> {
        Ok(wrong_type(format!(
            "{name} must be a list of str ({what}), not {}",
            value.get_type().name()?
        )))
    };
    if value.is_instance_of::<PyString>() {
        return Err(not_a_list()?);
    }
    let Ok(items) = value.extract::<Vec<Bound<'_, PyAny>>>() else {
        return Err(not_a_list()?);
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item.cast::<PyString>() {
            Ok(text) => text_of(text, &format!("{name}[{i}]")),
            Err(_) => Err(wrong_type(format!(
                "{name}[{i}] must be a str, not {}",
                item.get_type().name()?
            ))),
        })
        .collect()
}

/// `text` as UTF-8; one with a lone surrogate (which no UTF-8 can hold) is refused by name.
pub fn text_of(text: &Bound<'_, PyString>, name: &str) -> PyResult<String> {
    text.extract::<String>().map_err(|_| {
        usage(format!(
            "{name} is not valid Unicode: it holds a lone surrogate (such as '\\ud800'); \
             clean it first, e.g. text.encode('utf-8', 'replace').decode('utf-8')"
        ))
    })
}
