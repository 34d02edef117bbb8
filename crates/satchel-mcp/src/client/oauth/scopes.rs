//! Which scopes to ask for again when a server says the token is not
//! enough, and when to stop asking.
//!
//! SEP-2350: a re-authorization asks for what was granted plus what the
//! server now challenges for, never just the challenge (that would drop
//! scopes other operations need). rmcp can compute that union, but it
//! forgets the granted scopes across a restart and caps *upgrades* at 3
//! after the first authorization (4 in all); the suite, and common sense,
//! want at most 3 authorizations per operation, and none when the server
//! challenges for scopes Satchel already holds (asking again cannot help).

/// Authorization rounds one operation may start, the first included.
pub const MAX_ROUNDS: u32 = 3;

/// `granted` followed by the challenged scopes it lacks, in order, once each.
pub fn union(granted: &[String], challenged: &str) -> Vec<String> {
    let mut scopes: Vec<String> = Vec::new();
    for scope in granted
        .iter()
        .map(String::as_str)
        .chain(challenged.split_whitespace())
    {
        if !scopes.iter().any(|s| s == scope) {
            scopes.push(scope.to_owned());
        }
    }
    scopes
}

/// Whether `challenged` names a scope `granted` lacks.
pub fn adds_scopes(granted: &[String], challenged: &str) -> bool {
    challenged
        .split_whitespace()
        .any(|scope| !granted.iter().any(|g| g == scope))
}

/// The rounds of authorization one operation has spent.
#[derive(Debug, Default)]
pub struct Rounds {
    spent: u32,
}

impl Rounds {
    /// Takes a round if one is left.
    pub fn take(&mut self) -> bool {
        if self.spent >= MAX_ROUNDS {
            return false;
        }
        self.spent += 1;
        true
    }

    /// Rounds spent so far.
    pub fn spent(&self) -> u32 {
        self.spent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(scopes: &[&str]) -> Vec<String> {
        scopes.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn union_keeps_granted_scopes_first_and_adds_each_new_one_once() {
        assert_eq!(
            union(&owned(&["mcp:basic"]), "mcp:write mcp:basic  mcp:write"),
            owned(&["mcp:basic", "mcp:write"])
        );
        assert_eq!(union(&[], "a b"), owned(&["a", "b"]));
        assert_eq!(union(&owned(&["a"]), ""), owned(&["a"]));
    }

    #[test]
    fn a_challenge_for_held_scopes_adds_nothing() {
        assert!(!adds_scopes(&owned(&["mcp:admin"]), "mcp:admin"));
        assert!(adds_scopes(&owned(&["mcp:basic"]), "mcp:basic mcp:write"));
        assert!(!adds_scopes(&owned(&["a"]), ""));
    }

    #[test]
    fn at_most_three_rounds_in_all() {
        let mut rounds = Rounds::default();
        assert!(rounds.take());
        assert!(rounds.take());
        assert!(rounds.take());
        assert!(!rounds.take());
        assert_eq!(rounds.spent(), 3);
    }
}
