//! The properties of a model beyond its invariants: `sometimes` and
//! `eventually`, the model's own and the registered ones.

use crate::engine::erased::kind_of;
use crate::engine::erased::Erased as P;
use crate::model::world::World;
use crate::model::Model;

/// A `sometimes` or `eventually` property as the engine runs it.
pub(crate) struct PropertyFn<P: crate::model::Process> {
    pub(crate) name: &'static str,
    pub(crate) kind: crate::model::PropertyKind,
    pub(crate) check: Result<fn(&World<'_, P>) -> bool, crate::model::registered::ErasedCheck>,
}

/// The model's properties, then the registered ones.
pub(crate) fn property_fns(model: &Model<P>) -> Vec<PropertyFn<P>> {
    model
        .properties
        .iter()
        .map(|p| PropertyFn {
            name: p.name,
            kind: p.kind,
            check: Ok(p.check),
        })
        .chain(
            kind_of(model)
                .registered_properties()
                .into_iter()
                .map(|(name, kind, check)| PropertyFn {
                    name,
                    kind,
                    check: Err(check),
                }),
        )
        .collect()
}
