//! Shared code of the mrc-rs command-line tools.
