//! The runtime core end to end: a search whose states are arena pages finds
//! exactly the states of a search over plain values, in every tracking mode,
//! fingerprint width and page hash.

use cmc::memory::{FingerprintWidth, MemoryConfig};
use cmc::{ArenaConfig, PageHasher, Tracking};
use mutex_pages::{page_search, reference_search, Variant};

#[test]
fn page_states_match_the_reference_in_every_configuration() {
    for variant in [Variant::Peterson, Variant::CheckThenSet] {
        let reference = reference_search(variant);
        for tracking in [Tracking::Scan, Tracking::Mprotect, Tracking::Auto] {
            for width in [FingerprintWidth::Bits64, FingerprintWidth::Bits128] {
                for hasher in [PageHasher::Fold, PageHasher::Sip] {
                    let config = MemoryConfig::new().width(width).hasher(hasher);
                    let arena = ArenaConfig::new().reserve(1 << 20).tracking(tracking);
                    let pages = page_search(variant, config, arena).expect("arenas");
                    assert_eq!(
                        pages, reference,
                        "{variant:?} {tracking:?} {width:?} {hasher:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_known_answers() {
    // Pinned so that a change in the protocol or the search shows up here
    // and not only as an agreement between two searches.
    let peterson = reference_search(Variant::Peterson);
    assert_eq!(
        (peterson.unique, peterson.transitions, peterson.violation),
        (160, 266, None)
    );
    let broken = reference_search(Variant::CheckThenSet);
    assert_eq!((broken.unique, broken.transitions), (81, 144));
    assert_eq!(broken.violation, Some(vec![0, 1, 0, 1]));
}
