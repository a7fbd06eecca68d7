//! The properties of a model beyond its invariants: `sometimes` and
//! `eventually`, the model's own and the registered ones.

use crate::model::world::World;
use crate::model::{Model, Process};

/// A `sometimes` or `eventually` property as the engine runs it.
pub(crate) struct PropertyFn<P: Process> {
    pub(crate) name: &'static str,
    pub(crate) kind: crate::model::PropertyKind,
    pub(crate) check: Result<fn(&World<'_, P>) -> bool, crate::model::registered::ErasedCheck>,
}

/// The model's properties, then the registered ones.
pub(crate) fn property_fns<P: Process>(model: &Model<P>) -> Vec<PropertyFn<P>> {
    model
        .properties
        .iter()
        .map(|p| PropertyFn {
            name: p.name,
            kind: p.kind,
            check: Ok(p.check),
        })
        .chain(
            crate::model::registered::properties_for::<P>()
                .into_iter()
                .map(|(name, kind, check)| PropertyFn {
                    name,
                    kind,
                    check: Err(check),
                }),
        )
        .collect()
}
