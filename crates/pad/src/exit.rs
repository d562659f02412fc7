//! README.md's exit-code tables ("Exit codes"): the one place pad's own exit
//! numbers are written, and the one mapping from the API's error codes to them.

use pad_core::api::ErrorCode;

/// An exit code pad chooses itself. A code pad only passes on (CMD's own,
/// 128 + a signal) is a plain number, `CliError::Exit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Internal,
    /// Usage or bad input.
    Usage,
    /// No profile or token, a bad config file.
    Config,
    /// Authentication or permission.
    Auth,
    /// Not found, or no ready item for `claim-next`.
    NotFound,
    /// `lease_held`, `lease_lost`, `update_conflict`: taken by another, or lost.
    Conflict,
    /// Server unavailable or rate limited: worth another try.
    Unavailable,
    /// `pad run`: `--timeout` passed (as `timeout(1)` exits).
    TimedOut,
    /// `pad run`: CMD was found but could not be run (the shell's code).
    CannotRun,
    /// `pad run`: CMD was not found (the shell's code).
    CommandNotFound,
}

impl Exit {
    /// The codes pad exits with for its own reasons, whatever the command:
    /// `--exit-code-map` may not map onto them.
    pub const OWN: [Exit; 8] = [
        Exit::Internal,
        Exit::Usage,
        Exit::Config,
        Exit::Auth,
        Exit::NotFound,
        Exit::Conflict,
        Exit::Unavailable,
        Exit::TimedOut,
    ];

    pub const fn code(self) -> i32 {
        match self {
            Exit::Internal => 1,
            Exit::Usage => 2,
            Exit::Config => 3,
            Exit::Auth => 4,
            Exit::NotFound => 5,
            Exit::Conflict => 7,
            Exit::Unavailable => 8,
            Exit::TimedOut => 124,
            Exit::CannotRun => 126,
            Exit::CommandNotFound => 127,
        }
    }

    /// What the code means, in the words `pad run` uses when CMD exits with it.
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Internal => "internal error",
            Exit::Usage => "usage or bad input",
            Exit::Config => "configuration",
            Exit::Auth => "authentication",
            Exit::NotFound => "not found / no ready item",
            Exit::Conflict => "lease taken or lost",
            Exit::Unavailable => "server unavailable",
            Exit::TimedOut => "timed out",
            Exit::CannotRun => "CMD could not be run",
            Exit::CommandNotFound => "CMD not found",
        }
    }

    /// The exit code of an API error code (README.md, "Exit codes"). No
    /// wildcard: a new code must be placed in the table.
    pub fn of(code: ErrorCode) -> Exit {
        match code {
            ErrorCode::BadRequest
            | ErrorCode::ValidationFailed
            | ErrorCode::InvalidTtl
            | ErrorCode::MethodNotAllowed
            | ErrorCode::PayloadTooLarge
            | ErrorCode::UnsupportedMediaType => Exit::Usage,
            ErrorCode::Unauthorized | ErrorCode::Forbidden => Exit::Auth,
            ErrorCode::NotFound => Exit::NotFound,
            ErrorCode::LeaseHeld | ErrorCode::LeaseLost | ErrorCode::UpdateConflict => Exit::Conflict,
            ErrorCode::RateLimited | ErrorCode::Unavailable => Exit::Unavailable,
            ErrorCode::InternalError => Exit::Internal,
        }
    }

    /// The `code` of `--format json`'s envelope for a failure that is pad's
    /// own, not the server's.
    pub fn json_code(self) -> &'static str {
        match self {
            Exit::Usage => "bad_request",
            Exit::Config => "config_error",
            Exit::Auth => "unauthorized",
            Exit::NotFound => "not_found",
            Exit::Conflict => "conflict",
            Exit::Unavailable => "unavailable",
            Exit::Internal | Exit::TimedOut | Exit::CannotRun | Exit::CommandNotFound => "internal_error",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every API error code. The match fails to compile when a code is
    /// added, so the list cannot fall behind.
    fn every_code() -> [ErrorCode; 15] {
        let _whole = |c: ErrorCode| match c {
            ErrorCode::BadRequest
            | ErrorCode::ValidationFailed
            | ErrorCode::InvalidTtl
            | ErrorCode::Unauthorized
            | ErrorCode::Forbidden
            | ErrorCode::NotFound
            | ErrorCode::LeaseHeld
            | ErrorCode::LeaseLost
            | ErrorCode::UpdateConflict
            | ErrorCode::MethodNotAllowed
            | ErrorCode::PayloadTooLarge
            | ErrorCode::UnsupportedMediaType
            | ErrorCode::RateLimited
            | ErrorCode::InternalError
            | ErrorCode::Unavailable => (),
        };
        [
            ErrorCode::BadRequest,
            ErrorCode::ValidationFailed,
            ErrorCode::InvalidTtl,
            ErrorCode::Unauthorized,
            ErrorCode::Forbidden,
            ErrorCode::NotFound,
            ErrorCode::LeaseHeld,
            ErrorCode::LeaseLost,
            ErrorCode::UpdateConflict,
            ErrorCode::MethodNotAllowed,
            ErrorCode::PayloadTooLarge,
            ErrorCode::UnsupportedMediaType,
            ErrorCode::RateLimited,
            ErrorCode::InternalError,
            ErrorCode::Unavailable,
        ]
    }

    #[test]
    fn every_api_code_exits_as_the_readme_table_says() {
        // README.md, "Exit codes", row by row.
        let readme = |c: ErrorCode| match c.as_str() {
            "bad_request"
            | "validation_failed"
            | "invalid_ttl"
            | "method_not_allowed"
            | "payload_too_large"
            | "unsupported_media_type" => 2,
            "unauthorized" | "forbidden" => 4,
            "not_found" => 5,
            "lease_held" | "lease_lost" | "update_conflict" => 7,
            "rate_limited" | "unavailable" => 8,
            "internal_error" => 1,
            other => panic!("{other} is in no row of README's table"),
        };
        for code in every_code() {
            assert_eq!(Exit::of(code).code(), readme(code), "{code:?}");
            // pad-core's copy of the table, used by nobody here, agrees.
            assert_eq!(Exit::of(code).code(), code.exit_code(), "{code:?}");
        }
    }

    #[test]
    fn own_codes_are_the_readme_numbers() {
        let own: Vec<i32> = Exit::OWN.iter().map(|e| e.code()).collect();
        assert_eq!(own, [1, 2, 3, 4, 5, 7, 8, 124]);
        assert_eq!((Exit::CannotRun.code(), Exit::CommandNotFound.code()), (126, 127));
    }
}
