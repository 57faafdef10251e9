//! The order of a series' points: by time (the default: each invocation's runs are a point, in the order they
//! ran), or by revision (the topological order of a git repository's commits, oldest first: the runs of one
//! revision pool into one point, wherever they were recorded in time, so a revision measured late, by a bisect
//! or a rerun, lands where it belongs in the code's history). Runs whose revision the repository does not know
//! are left out of a revision-ordered series, and listed.

use std::collections::HashMap;
use std::path::Path;

/// Why the revision order could not be read.
#[derive(Debug, thiserror::Error)]
pub enum OrderError {
    /// `git rev-list` failed (not a repository, no commit, git missing).
    #[error("{dir}: cannot read the order of the revisions (`git rev-list --topo-order --reverse HEAD`): {message}")]
    Git {
        /// The folder git ran in.
        dir: String,
        /// What git (or starting it) said.
        message: String,
    },
}

/// The commits of a repository's history in topological order, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RevisionOrder {
    /// Full commit ids, oldest first.
    commits: Vec<String>,
    /// Each commit's position in `commits`.
    position: HashMap<String, usize>,
}

/// Shortest revision prefix matched against the commits.
const MIN_PREFIX: usize = 7;

impl RevisionOrder {
    /// An order of these commits (full ids, oldest first).
    pub fn of_commits(commits: Vec<String>) -> Self {
        let position = commits.iter().enumerate().map(|(i, c)| (c.clone(), i)).collect();
        Self { commits, position }
    }

    /// The history of HEAD in the repository at `dir`: `git rev-list --topo-order --reverse HEAD`.
    pub fn of_repository(dir: &Path) -> Result<Self, OrderError> {
        let fail = |message: String| OrderError::Git { dir: dir.display().to_string(), message };
        let out = super::git::run(dir, &["rev-list", "--topo-order", "--reverse", "HEAD"])
            .map_err(|e| fail(e.to_string()))?;
        if !out.status.success() {
            return Err(fail(String::from_utf8_lossy(&out.stderr).trim().to_string()));
        }
        let commits = String::from_utf8_lossy(&out.stdout).lines().map(|l| l.trim().to_string()).collect();
        Ok(Self::of_commits(commits))
    }

    /// The position of a recorded revision: a full commit id, or a prefix of at least 7 hex digits naming one
    /// commit; `None` when the history does not hold it.
    pub fn position(&self, revision: &str) -> Option<usize> {
        let revision = revision.trim().to_ascii_lowercase();
        if let Some(&i) = self.position.get(&revision) {
            return Some(i);
        }
        if revision.len() < MIN_PREFIX || !revision.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let mut matching = self.commits.iter().enumerate().filter(|(_, c)| c.starts_with(&revision));
        match (matching.next(), matching.next()) {
            (Some((i, _)), None) => Some(i),
            _ => None,
        }
    }

    /// The full commit id at a position.
    pub fn commit(&self, position: usize) -> Option<&str> {
        self.commits.get(position).map(String::as_str)
    }

    /// How many commits the history holds.
    pub fn len(&self) -> usize {
        self.commits.len()
    }

    /// Whether the history holds no commit.
    pub fn is_empty(&self) -> bool {
        self.commits.is_empty()
    }
}

/// How a series' points are ordered.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PointOrder {
    /// In the order the runs ran; each invocation's runs are a point.
    #[default]
    Time,
    /// In the revisions' order; each revision's runs are a point.
    Revision(RevisionOrder),
}

impl PointOrder {
    /// `time` or `revision`.
    pub fn name(&self) -> &'static str {
        match self {
            PointOrder::Time => "time",
            PointOrder::Revision(_) => "revision",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_are_found_by_full_id_or_unique_prefix() {
        let order = RevisionOrder::of_commits(vec!["aaaa1111".repeat(5), "aaaa2222".repeat(5), "bbbb".repeat(10)]);
        assert_eq!(order.position(&"aaaa2222".repeat(5)), Some(1));
        assert_eq!(order.position("bbbbbbb"), Some(2));
        assert_eq!(order.position("AAAA111"), Some(0), "case does not matter");
        assert_eq!(order.position("aaaa"), None, "too short");
        assert_eq!(order.position("aaaa"), None);
        assert_eq!(order.position("r1"), None, "a name the history does not know");
        let ambiguous = RevisionOrder::of_commits(vec!["abcdef01".repeat(5), "abcdef02".repeat(5)]);
        assert_eq!(ambiguous.position("abcdef0"), None, "a prefix of two commits names neither");
        assert_eq!((order.len(), order.commit(2).map(str::len)), (3, Some(40)));
    }
}
