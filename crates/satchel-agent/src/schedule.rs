//! Which tool calls of one turn may run at the same time.
//!
//! Calls run concurrently unless their capabilities conflict (one writes
//! a resource the other reads or writes); a call then waits for every
//! earlier call it conflicts with. Results still go back in the order the
//! model asked, whatever order they finish in.

use satchel_core::Capabilities;

/// Groups call indices into waves: every call of a wave may run with the
/// others of its wave; wave N+1 starts when wave N is done. A call lands
/// one wave after the latest earlier call it conflicts with.
pub fn waves(capabilities: &[Option<&Capabilities>]) -> Vec<Vec<usize>> {
    let mut wave_of: Vec<usize> = Vec::with_capacity(capabilities.len());
    let mut waves: Vec<Vec<usize>> = Vec::new();
    for (index, caps) in capabilities.iter().enumerate() {
        let wave = match caps {
            None => 0,
            Some(caps) => capabilities[..index]
                .iter()
                .zip(&wave_of)
                .filter_map(|(earlier, wave)| {
                    let earlier = (*earlier)?;
                    caps.conflicts_with(earlier).then_some(wave + 1)
                })
                .max()
                .unwrap_or(0),
        };
        wave_of.push(wave);
        if waves.len() <= wave {
            waves.resize_with(wave + 1, Vec::new);
        }
        waves[wave].push(index);
    }
    waves
}

#[cfg(test)]
mod tests {
    use satchel_core::Resource;

    use super::*;

    fn caps(reads: &[Resource], writes: &[Resource]) -> Capabilities {
        Capabilities {
            reads: reads.to_vec(),
            writes: writes.to_vec(),
        }
    }

    #[test]
    fn readers_share_a_wave_and_writers_wait_for_what_they_touch() {
        let read_files = caps(&[Resource::FILES], &[]);
        let write_files = caps(&[], &[Resource::FILES]);
        let web = caps(&[Resource::INTERNET], &[]);
        let calls = [
            Some(&read_files),
            Some(&web),
            Some(&write_files),
            Some(&read_files),
            None,
        ];
        assert_eq!(waves(&calls), vec![vec![0, 1, 4], vec![2], vec![3]]);
    }
}
