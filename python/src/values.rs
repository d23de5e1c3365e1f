//! Values across the boundary: a config given as a dict becomes TOML text for the config
//! reader (which checks it as it checks a file), and JSON records become Python objects.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors::wrong_type;

/// Deepest nesting a config dict may have: a config file has three levels, and a dict that
/// holds itself would otherwise recurse until the stack ran out.
const MOST_DEPTH: usize = 32;

/// Most values a config dict may hold, counted as written out: a config file has about a
/// hundred, and a dict that holds one sub-dict twice at each of 25 levels would write out
/// tens of millions.
const MOST_VALUES: usize = 100_000;

/// `dict` (the sections of a config file, as `tomllib.load` gives them) as TOML text.
pub fn toml_of(dict: &Bound<'_, PyDict>) -> PyResult<String> {
    let table = table_of(dict, None, 0, &mut 0)?;
    toml::to_string(&table).map_err(|e| wrong_type(format!("config: {e}")))
}

/// `dict`'s keys and values as a TOML table; `prefix` is its own dotted key (`None` at the top).
fn table_of(
    dict: &Bound<'_, PyDict>,
    prefix: Option<&str>,
    depth: usize,
    count: &mut usize,
) -> PyResult<toml::Table> {
    let mut table = toml::Table::new();
    for (key, value) in dict.iter() {
        let Ok(key) = key.extract::<String>() else {
            let within = prefix.map_or(String::new(), |p| format!(" {p}"));
            return Err(wrong_type(format!(
                "config{within}: keys must be str, not {}",
                key.get_type().name()?
            )));
        };
        let dotted = prefix.map_or(key.clone(), |p| format!("{p}.{key}"));
        table.insert(key, value_of(&value, &dotted, depth + 1, count)?);
    }
    Ok(table)
}

fn value_of(
    value: &Bound<'_, PyAny>,
    key: &str,
    depth: usize,
    count: &mut usize,
) -> PyResult<toml::Value> {
    *count += 1;
    if *count > MOST_VALUES {
        return Err(crate::errors::usage(format!(
            "the config dict holds more than {MOST_VALUES} values (does one dict appear in \
             it many times?)"
        )));
    }
    if depth > MOST_DEPTH {
        return Err(crate::errors::usage(format!(
            "config key {}...: nested more than {MOST_DEPTH} deep (does a dict or list hold \
             itself?)",
            key.chars().take(60).collect::<String>()
        )));
    }
    if value.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(value.extract()?));
    }
    if value.is_instance_of::<PyInt>() {
        let number: i64 = value.extract().map_err(|_| {
            wrong_type(format!("config key {key}: {value} does not fit in 64 bits"))
        })?;
        return Ok(toml::Value::Integer(number));
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(value.extract()?));
    }
    if value.is_instance_of::<PyString>() {
        return Ok(toml::Value::String(value.extract()?));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        return Ok(toml::Value::Table(table_of(dict, Some(key), depth, count)?));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let items: Vec<Bound<'_, PyAny>> = value.extract()?;
        let items = items
            .iter()
            .enumerate()
            .map(|(i, item)| value_of(item, &format!("{key}[{i}]"), depth + 1, count))
            .collect::<PyResult<_>>()?;
        return Ok(toml::Value::Array(items));
    }
    // numpy's numbers: an int by `__index__`, a float by `__float__`.
    if let Ok(number) = value.extract::<i64>() {
        return Ok(toml::Value::Integer(number));
    }
    if let Ok(number) = value.extract::<f64>() {
        return Ok(toml::Value::Float(number));
    }
    // A path (pathlib.Path) is a config's file name.
    if let Ok(path) = value.extract::<std::path::PathBuf>() {
        return Ok(toml::Value::String(path.display().to_string()));
    }
    Err(wrong_type(format!(
        "config key {key}: a {} is not a config value (use bool, int, float, str, list or dict)",
        value.get_type().name()?
    )))
}

/// A JSON value as the Python object `json.loads` would give.
pub fn python_of<'py>(py: Python<'py>, value: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(python_of(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(fields) => {
            let dict = PyDict::new(py);
            for (key, item) in fields {
                dict.set_item(key, python_of(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// `text` as Python's `repr` writes it.
pub fn python_repr(py: Python<'_>, text: &str) -> PyResult<String> {
    Ok(PyString::new(py, text).repr()?.to_string())
}
