//! [`ToolSections`]: the parsed agent.json sections of tools this crate
//! does not know (the built-ins' `search` and `code`), carried to every
//! call in [`ToolsConfig`](crate::ToolsConfig) without the runtime
//! depending on the crates that define them.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// A value a tool crate parsed from its own section of agent.json.
pub trait Section: Any + fmt::Debug + Send + Sync {}

impl<T: Any + fmt::Debug + Send + Sync> Section for T {}

/// One value per type; a tool reads its section with [`ToolSections::get`]
/// and falls back to its default when the host never set one (a bare
/// registry in a test, say).
#[derive(Clone, Default)]
pub struct ToolSections(HashMap<TypeId, Arc<dyn Section>>);

impl ToolSections {
    /// Sets `T`'s section, replacing an earlier one.
    pub fn insert<T: Section>(&mut self, section: T) {
        self.0.insert(TypeId::of::<T>(), Arc::new(section));
    }

    /// `T`'s section, if the host set one.
    pub fn get<T: Section>(&self) -> Option<&T> {
        let section: &dyn Any = self.0.get(&TypeId::of::<T>())?.as_ref();
        section.downcast_ref::<T>()
    }

    /// Whether no section was set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for ToolSections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.values()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Search(u32);

    #[test]
    fn a_section_is_found_by_its_type_and_replaced_by_a_new_one() {
        let mut sections = ToolSections::default();
        assert_eq!(sections.get::<Search>(), None);
        sections.insert(Search(1));
        sections.insert(Search(2));
        assert_eq!(sections.get::<Search>(), Some(&Search(2)));
        assert_eq!(sections.get::<u8>(), None);
    }
}
