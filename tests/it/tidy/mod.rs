//! Tidy rules: checks over the project's own source that keep the rules of `ARCHITECTURE.md` and
//! `docs/contributing.md` true by themselves, each failing with the `file:line` of every offender.

mod op_matches;
