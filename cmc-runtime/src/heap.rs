//! TEMPORARY bump heap (replaced by the real allocator before commit).
#![allow(dead_code, clippy::undocumented_unsafe_blocks, missing_docs)]
use core::alloc::Layout;
use core::ptr::NonNull;
pub(crate) const POISON: u8 = 0xA5;
pub(crate) const HEADER_SIZE: usize = 64;
pub(crate) trait Backing {
    fn ensure_committed(&self, end: usize) -> bool;
}
#[derive(Clone, Copy, Debug)]
pub(crate) struct Heap {
    base: NonNull<u8>,
}
impl Heap {
    pub(crate) unsafe fn init(base: *mut u8) -> Heap {
        unsafe {
            *(base as *mut u64) = HEADER_SIZE as u64;
        }
        Heap {
            base: NonNull::new(base).unwrap(),
        }
    }
    pub(crate) unsafe fn attach(base: *mut u8) -> Heap {
        Heap {
            base: NonNull::new(base).unwrap(),
        }
    }
    pub(crate) fn used(&self) -> usize {
        unsafe { *(self.base.as_ptr() as *const u64) as usize }
    }
    pub(crate) unsafe fn alloc(&self, layout: Layout, b: &impl Backing) -> *mut u8 {
        let top = self.used();
        let start = (top + 16).next_multiple_of(layout.align().max(16));
        let end = (start + layout.size()).next_multiple_of(16);
        if !b.ensure_committed(end) {
            return core::ptr::null_mut();
        }
        unsafe {
            *(self.base.as_ptr().add(start - 8) as *mut u64) = layout.size() as u64;
            *(self.base.as_ptr() as *mut u64) = end as u64;
            self.base.as_ptr().add(start)
        }
    }
    pub(crate) unsafe fn alloc_zeroed(&self, layout: Layout, b: &impl Backing) -> *mut u8 {
        unsafe { self.alloc(layout, b) }
    }
    pub(crate) unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { core::ptr::write_bytes(ptr, POISON, layout.size()) }
    }
    pub(crate) unsafe fn realloc(
        &self,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
        b: &impl Backing,
    ) -> *mut u8 {
        unsafe {
            let q = self.alloc(
                Layout::from_size_align_unchecked(new_size, layout.align()),
                b,
            );
            if q.is_null() {
                return q;
            }
            core::ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size));
            self.dealloc(ptr, layout);
            q
        }
    }
}
