//! Symmetry reduction: a state fingerprinted as the smallest of its
//! images under the permutations of a model's interchangeable processes
//! (see `Model::interchangeable`).
//!
//! An image is never built. Its fingerprint is the state's own components
//! hashed under a [`Renaming`] (every process identifier a `StateHash`
//! writes is written renamed) and summed at the permuted slots; messages
//! in flight are summed order-free with their renamed senders and
//! receivers (a FIFO link's messages in their order), timers with their
//! renamed owners. A component that writes no identifier is its own image
//! under every renaming and is hashed once.
//!
//! Trying every permutation costs n! per state. Only those that sort the
//! processes by a *colour* that no renaming changes are tried: a process's
//! component hashed under the masked renaming (every identifier written as
//! one value), with the messages and timers it has. The set of sorting
//! permutations of a state's image is that of the state composed with the
//! renaming, so the smallest image over them is the same for the whole
//! orbit: the canonical form stays exact. Where colours tie and some
//! component holds identifiers, each tied process's colour also gets where
//! its identifier appears: every such component hashed under the renaming
//! that singles it out (two RMs in the same state, one of which the
//! coordinator counts as prepared, are told apart without trying both
//! orders). Where the colours tie so much
//! that more than [`EXACT_LIMIT`] permutations sort them, only one is
//! tried (ties broken by process index): the fingerprint is then that of
//! some image of the state, which is sound (two states get the same one
//! only if they are images of each other) but may count an orbit more
//! than once.

use crate::identity::rename::Renaming;
use crate::model::Interchangeable;

/// The most sorting permutations tried per state: 7! (exact for up to
/// seven interchangeable processes whatever their states).
pub(crate) const EXACT_LIMIT: usize = 5040;

/// A model's declared symmetry, ready for fingerprinting.
#[derive(Clone, Debug)]
pub(crate) struct Symmetry {
    /// Each group's process indices, sorted.
    groups: Vec<Vec<usize>>,
    /// The identifiers of the grouped processes, in the order of `flat`.
    ids: Vec<u64>,
    /// The grouped processes, group after group.
    flat: Vec<usize>,
    /// Each process's position in `flat`, if grouped.
    position: Vec<Option<usize>>,
    pub(crate) identity: Renaming,
    pub(crate) masked: Renaming,
    /// The number of processes of the model.
    count: usize,
}

impl Symmetry {
    /// The symmetry of `groups` in a model of `count` processes, or why
    /// the declaration is wrong.
    pub(crate) fn new(groups: &[Interchangeable], count: usize) -> Result<Symmetry, String> {
        let mut position = vec![None; count];
        let mut flat = Vec::new();
        let mut ids = Vec::new();
        for g in groups {
            for (&p, &id) in g.processes.iter().zip(&g.ids) {
                if p >= count {
                    return Err(format!(
                        "process {p} is declared interchangeable, but the model has {count} \
                         processes"
                    ));
                }
                if position[p].is_some() {
                    return Err(format!(
                        "process {p} is declared interchangeable in two groups"
                    ));
                }
                position[p] = Some(flat.len());
                flat.push(p);
                ids.push(id);
            }
        }
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!(
                "two interchangeable processes have the identifier {}: each process needs its \
                 own",
                w[0]
            ));
        }
        Ok(Symmetry {
            groups: groups.iter().map(|g| g.processes.clone()).collect(),
            identity: Renaming::identity(ids.clone()),
            masked: Renaming::masked(&ids),
            ids,
            flat,
            position,
            count,
        })
    }

    /// For each grouped process, the renaming that singles out its
    /// identifier (see [`Renaming::singled`]).
    pub(crate) fn singled(&self) -> impl Iterator<Item = (usize, Renaming)> + '_ {
        self.flat
            .iter()
            .enumerate()
            .map(|(k, &p)| (p, Renaming::singled(&self.ids, k)))
    }

    /// Whether process `i` is interchangeable with others.
    pub(crate) fn grouped(&self, i: usize) -> bool {
        self.position[i].is_some()
    }

    /// The renaming of the process permutation `perm` (process `i` goes to
    /// slot `perm[i]`).
    pub(crate) fn renaming(&self, perm: &[usize]) -> Renaming {
        let flat_perm = self
            .flat
            .iter()
            .map(|&p| self.position[perm[p]].expect("a group is permuted within itself"))
            .collect();
        Renaming::new(self.ids.clone(), flat_perm)
    }

    /// The processes of each group sorted by their `colours` (invariant
    /// under renaming), split into classes of equal colour: group after
    /// group, class after class.
    pub(crate) fn classes(&self, colours: &[u128]) -> Vec<Vec<usize>> {
        assert_eq!(colours.len(), self.count, "a colour per process");
        let mut classes = Vec::new();
        for g in &self.groups {
            let mut members = g.clone();
            members.sort_by_key(|&p| (colours[p], p));
            for run in members.chunk_by(|&a, &b| colours[a] == colours[b]) {
                classes.push(run.to_vec());
            }
        }
        classes
    }

    /// The permutations that put each group's processes in the order of
    /// `classes` (from [`Symmetry::classes`]), every order within a class
    /// unless `fixed` says the class's orders all give the same image: at
    /// most [`EXACT_LIMIT`] of them, and whether they are all (else the
    /// one that keeps each class as it is).
    pub(crate) fn candidates(
        &self,
        classes: &[Vec<usize>],
        fixed: &[bool],
    ) -> (Vec<Vec<usize>>, bool) {
        assert_eq!(classes.len(), fixed.len(), "a flag per class");
        let count = classes
            .iter()
            .zip(fixed)
            .filter(|(_, &f)| !f)
            .fold(1usize, |n, (c, _)| n.saturating_mul(factorial(c.len())));
        let exact = count <= EXACT_LIMIT;
        // The orders of the grouped processes, class after class.
        let mut orders: Vec<Vec<usize>> = vec![Vec::with_capacity(self.flat.len())];
        for (class, &fixed) in classes.iter().zip(fixed) {
            if !exact || fixed || class.len() == 1 {
                for o in &mut orders {
                    o.extend_from_slice(class);
                }
                continue;
            }
            let perms = permutations(class);
            orders = orders
                .iter()
                .flat_map(|o| {
                    perms.iter().map(move |p| {
                        let mut o = o.clone();
                        o.extend_from_slice(p);
                        o
                    })
                })
                .collect();
        }
        let perms = orders
            .into_iter()
            .map(|order| self.placing(&order))
            .collect();
        (perms, exact)
    }

    /// The permutation that puts the k-th process of `order` (the grouped
    /// processes, group after group) in its group's k-th slot.
    pub(crate) fn placing(&self, order: &[usize]) -> Vec<usize> {
        let mut perm: Vec<usize> = (0..self.count).collect();
        let mut at = 0;
        for g in &self.groups {
            for &slot in g {
                perm[order[at]] = slot;
                at += 1;
            }
        }
        perm
    }
}

fn factorial(n: usize) -> usize {
    (1..=n).fold(1usize, |a, k| a.saturating_mul(k))
}

/// Every order of `items`.
fn permutations(items: &[usize]) -> Vec<Vec<usize>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::with_capacity(factorial(items.len()));
    for (i, &first) in items.iter().enumerate() {
        let mut rest = items.to_vec();
        rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, first);
            out.push(p);
        }
    }
    out
}

/// The inverse of a permutation.
pub(crate) fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    inv
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidates(s: &Symmetry, colours: &[u128]) -> (Vec<Vec<usize>>, bool) {
        let classes = s.classes(colours);
        s.candidates(&classes, &vec![false; classes.len()])
    }

    #[test]
    fn a_fixed_class_is_not_permuted() {
        let s = Symmetry::new(&[group(vec![0, 1, 2, 3])], 4).unwrap();
        let classes = s.classes(&[1, 1, 2, 2]);
        assert_eq!(classes, vec![vec![0, 1], vec![2, 3]]);
        let (perms, exact) = s.candidates(&classes, &[true, false]);
        assert!(exact);
        assert_eq!(perms, vec![vec![0, 1, 2, 3], vec![0, 1, 3, 2]]);
    }

    fn group(processes: Vec<usize>) -> Interchangeable {
        let ids = processes.iter().map(|&p| 100 + p as u64).collect();
        Interchangeable {
            processes,
            ids,
            plain: false,
        }
    }

    #[test]
    fn distinct_colours_give_one_permutation_that_sorts_them() {
        let s = Symmetry::new(&[group(vec![1, 2, 3])], 4).unwrap();
        let (perms, exact) = candidates(&s, &[9, 30, 10, 20]);
        assert!(exact);
        // Process 2 (colour 10) to slot 1, 3 (20) to 2, 1 (30) to 3.
        assert_eq!(perms, vec![vec![0, 3, 1, 2]]);
    }

    #[test]
    fn tied_colours_give_every_order_of_the_tie() {
        let s = Symmetry::new(&[group(vec![0, 1, 2]), group(vec![3, 4])], 5).unwrap();
        let (perms, exact) = candidates(&s, &[5, 5, 5, 7, 7]);
        assert!(exact);
        assert_eq!(perms.len(), 12);
        let mut unique = perms.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 12);
        for p in &perms {
            assert!(p[..3].iter().all(|&s| s < 3) && p[3..].iter().all(|&s| s >= 3));
        }
    }

    #[test]
    fn too_many_ties_give_one_permutation() {
        let s = Symmetry::new(&[group((0..8).collect())], 8).unwrap();
        let (perms, exact) = candidates(&s, &[1; 8]);
        assert!(!exact);
        assert_eq!(perms, vec![(0..8).collect::<Vec<_>>()]);
    }

    #[test]
    fn sorting_is_the_same_for_every_image() {
        // The candidates of a permuted colouring, composed with the
        // permutation, are the candidates of the original.
        let s = Symmetry::new(&[group(vec![0, 1, 2, 3])], 4).unwrap();
        let colours = [3, 1, 3, 2];
        let sigma = [2, 0, 3, 1];
        let mut moved = [0; 4];
        for i in 0..4 {
            moved[sigma[i]] = colours[i];
        }
        let (a, _) = candidates(&s, &colours);
        let (b, _) = candidates(&s, &moved);
        let mut composed: Vec<Vec<usize>> = b
            .iter()
            .map(|p| (0..4).map(|i| p[sigma[i]]).collect())
            .collect();
        let mut a = a;
        a.sort();
        composed.sort();
        assert_eq!(a, composed);
    }

    #[test]
    fn renaming_follows_the_permutation() {
        let s = Symmetry::new(&[group(vec![1, 2, 3])], 4).unwrap();
        let r = s.renaming(&[0, 3, 1, 2]);
        assert_eq!(
            (r.rename(101), r.rename(102), r.rename(103)),
            (103, 101, 102)
        );
        assert_eq!(r.rename(100), 100);
        assert_eq!(inverse(&[0, 3, 1, 2]), vec![0, 2, 3, 1]);
    }

    #[test]
    fn bad_declarations_are_refused() {
        assert!(Symmetry::new(&[group(vec![0, 5])], 3)
            .unwrap_err()
            .contains("has 3 processes"));
        assert!(Symmetry::new(&[group(vec![0, 1]), group(vec![1, 2])], 3)
            .unwrap_err()
            .contains("two groups"));
        let same = Interchangeable {
            processes: vec![0, 1],
            ids: vec![4, 4],
            plain: false,
        };
        assert!(Symmetry::new(&[same], 2)
            .unwrap_err()
            .contains("identifier 4"));
    }
}
