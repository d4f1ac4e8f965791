//! The error taxonomy (contract §3): five codes, one message shape per engine.

use std::fmt;

/// A contract error code. Each maps to one SQLSTATE and one facade variant.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    /// `ALK01`: empty name, NUL in a name.
    InvalidName,
    /// `ALK02`: a directly supplied name starts with `__alkstore_`.
    ReservedName,
    /// `ALK03`: options are not an object, have an unknown key, a bad value or contradict.
    InvalidOptions,
    /// `ALK04`: payload is not valid JSON, or a notification payload is too large.
    InvalidPayload,
    /// `ALK05`: any other bad argument.
    InvalidArgument,
}

impl Code {
    /// Every code, in code order.
    pub const ALL: [Code; 5] = [
        Code::InvalidName,
        Code::ReservedName,
        Code::InvalidOptions,
        Code::InvalidPayload,
        Code::InvalidArgument,
    ];

    /// The SQLSTATE / code string, e.g. `"ALK01"`.
    pub fn code(self) -> &'static str {
        match self {
            Code::InvalidName => "ALK01",
            Code::ReservedName => "ALK02",
            Code::InvalidOptions => "ALK03",
            Code::InvalidPayload => "ALK04",
            Code::InvalidArgument => "ALK05",
        }
    }

    /// The variant name used in messages and in the facade, e.g. `"InvalidName"`.
    pub fn variant(self) -> &'static str {
        match self {
            Code::InvalidName => "InvalidName",
            Code::ReservedName => "ReservedName",
            Code::InvalidOptions => "InvalidOptions",
            Code::InvalidPayload => "InvalidPayload",
            Code::InvalidArgument => "InvalidArgument",
        }
    }

    /// Looks a code up by its code string (`"ALK03"`).
    pub fn from_code(code: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.code() == code)
    }
}

/// The longest sentence of an error, in characters: with its prefix
/// (`alkstore ALK05 InvalidArgument: `) a message stays under 1000.
pub const MAX_DETAIL_CHARS: usize = 950;

/// A contract violation: which rule, and a sentence naming the bad value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContractError {
    /// Which of the five codes.
    pub code: Code,
    /// The human sentence, without any prefix.
    pub detail: String,
}

impl ContractError {
    /// Builds an error from a code and a sentence. The sentence is cut to
    /// [`MAX_DETAIL_CHARS`] characters: a message is never over 1000
    /// characters, whatever the input (contract v1.1 §G).
    pub fn new(code: Code, detail: impl Into<String>) -> Self {
        let mut detail = detail.into();
        if let Some((cut, _)) = detail.char_indices().nth(MAX_DETAIL_CHARS) {
            detail.truncate(cut);
            detail.push('…');
        }
        ContractError { code, detail }
    }

    /// The SQLite message form: `alkstore ALK01 InvalidName: …`.
    pub fn sqlite_message(&self) -> String {
        format!(
            "alkstore {} {}: {}",
            self.code.code(),
            self.code.variant(),
            self.detail
        )
    }

    /// The PostgreSQL message form (SQLSTATE carries the code): `alkstore: InvalidName: …`.
    pub fn postgres_message(&self) -> String {
        format!("alkstore: {}: {}", self.code.variant(), self.detail)
    }

    /// Recognises either engine's message form, e.g. in a driver error's text.
    ///
    /// ```
    /// use alkstore_core::{Code, ContractError};
    /// let e = ContractError::parse("alkstore ALK02 ReservedName: no").unwrap();
    /// assert_eq!(e.code, Code::ReservedName);
    /// assert_eq!(e.detail, "no");
    /// ```
    pub fn parse(message: &str) -> Option<ContractError> {
        let at = message.find("alkstore")?;
        let rest = &message[at + "alkstore".len()..];
        if let Some(rest) = rest.strip_prefix(": ") {
            let (variant, detail) = rest.split_once(": ")?;
            let code = Code::ALL.into_iter().find(|c| c.variant() == variant)?;
            return Some(ContractError::new(code, detail));
        }
        let rest = rest.strip_prefix(' ')?;
        let (code, rest) = rest.split_once(' ')?;
        let code = Code::from_code(code)?;
        let detail = rest.strip_prefix(code.variant())?.strip_prefix(": ")?;
        Some(ContractError::new(code, detail))
    }
}

impl fmt::Display for ContractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sqlite_message())
    }
}

impl std::error::Error for ContractError {}

/// Shorthand for building a [`ContractError`] inside `Err`.
pub fn err<T>(code: Code, detail: impl Into<String>) -> Result<T, ContractError> {
    Err(ContractError::new(code, detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_message_forms_round_trip() {
        for code in Code::ALL {
            let e = ContractError::new(code, "bad \"x\": really");
            assert_eq!(ContractError::parse(&e.sqlite_message()), Some(e.clone()));
            assert_eq!(ContractError::parse(&e.postgres_message()), Some(e.clone()));
        }
        assert_eq!(ContractError::parse("no such table: alk_jobs"), None);
        assert_eq!(ContractError::parse("alkstore ALK09 Nope: x"), None);
    }
}
