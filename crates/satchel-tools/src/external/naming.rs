//! From an executable's file name to the tool name the model sees.

use satchel_core::is_valid_tool_name;

/// The tool name for a file: a `-tool` suffix is dropped and hyphens
/// become underscores (`file-read-tool` → `file_read`). Errors say why the
/// name cannot be a tool name and what to rename the file to.
pub fn tool_name_for_file(file_name: &str) -> Result<String, String> {
    let stem = file_name.strip_suffix("-tool").unwrap_or(file_name);
    let name = stem.replace('-', "_");
    if is_valid_tool_name(&name) {
        return Ok(name);
    }
    let hint = match stem.rsplit_once('.') {
        Some((base, _)) if is_valid_tool_name(&base.replace('-', "_")) => {
            format!("; rename it to `{base}`")
        }
        _ => String::new(),
    };
    Err(format!(
        "`{name}` is not a valid tool name (1-64 characters of A-Z, a-z, 0-9, `_`, `-`){hint}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix_dropped_and_hyphens_become_underscores() {
        assert_eq!(tool_name_for_file("file-read-tool").unwrap(), "file_read");
        assert_eq!(tool_name_for_file("weather").unwrap(), "weather");
        assert_eq!(tool_name_for_file("my-tool-tool").unwrap(), "my_tool");
        assert_eq!(tool_name_for_file("tool").unwrap(), "tool");
    }

    #[test]
    fn invalid_names_say_what_to_do() {
        assert_eq!(
            tool_name_for_file("weather.py").unwrap_err(),
            "`weather.py` is not a valid tool name (1-64 characters of A-Z, a-z, 0-9, `_`, `-`); rename it to `weather`"
        );
        assert!(tool_name_for_file("-tool").is_err());
        assert!(tool_name_for_file("has space").is_err());
    }
}
