//! What the CPU backend's threads share during a pass: a barrier between ops and buffers that
//! several threads write disjoint parts of.
//!
//! A pass starts its threads once (`std::thread::scope`) and every thread walks the whole op
//! list, doing its share of each op and meeting the others at a barrier after it: a decode step
//! has about 700 ops and barriers, so spawning threads per op (tens of µs each) or parking them
//! in the kernel between ops would cost more than the arithmetic.

use std::cell::UnsafeCell;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A reusable barrier for `n` threads that spins briefly, then yields (the machine may have
/// fewer free cores than threads).
pub struct SpinBarrier {
    n: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    pub fn new(n: usize) -> Self {
        Self { n: n.max(1), arrived: AtomicUsize::new(0), generation: AtomicUsize::new(0) }
    }

    /// Returns once all `n` threads have called it; what each wrote before is visible to all
    /// after.
    pub fn wait(&self) {
        if self.n == 1 {
            return;
        }
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            unpark(&self.generation);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if spins < 2000 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                park(&self.generation, generation);
            }
        }
    }
}

/// Gives the core away while `word` still holds `seen`: natively a yield; in a wasm build with
/// shared memory a `memory.atomic.wait32` of at most a millisecond where this thread may block
/// (a pool worker, or a caller in a worker, see `pool.rs`), else nothing (spinning on). On a
/// machine with fewer free cores than threads, spinning threads would take the core from the
/// one that the others wait for.
fn park(word: &AtomicUsize, seen: usize) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (word, seen);
        std::thread::yield_now();
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    super::pool::park(word, seen);
    #[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
    let _ = (word, seen);
}

/// Wakes the threads parked on `word`.
fn unpark(word: &AtomicUsize) {
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    super::pool::unpark(word);
    let _ = word;
}

/// A slice that the threads of a pass write in disjoint parts between barriers.
pub struct Shared<'a, T> {
    cell: &'a [UnsafeCell<T>],
}

// SAFETY: access goes through the unsafe methods below, whose callers guarantee that no two
// threads touch the same element between two barriers unless both only read.
unsafe impl<T: Send> Sync for Shared<'_, T> {}

impl<'a, T> Shared<'a, T> {
    pub fn new(v: &'a mut [T]) -> Self {
        let len = v.len();
        // SAFETY: UnsafeCell<T> has T's layout, and the exclusive borrow is held for 'a.
        let cell = unsafe { std::slice::from_raw_parts(v.as_mut_ptr() as *const UnsafeCell<T>, len) };
        Self { cell }
    }

    pub fn len(&self) -> usize {
        self.cell.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cell.is_empty()
    }

    /// # Safety
    /// No thread writes any element of `range` until the caller is done with the slice.
    pub unsafe fn get(&self, range: Range<usize>) -> &[T] {
        let part = &self.cell[range];
        std::slice::from_raw_parts(part.as_ptr() as *const T, part.len())
    }

    /// # Safety
    /// No other thread reads or writes any element of `range` until the caller is done with it.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get_mut(&self, range: Range<usize>) -> &mut [T] {
        let part = &self.cell[range];
        std::slice::from_raw_parts_mut(part.as_ptr() as *mut T, part.len())
    }
}

impl<T: Copy> Shared<'_, T> {
    /// # Safety
    /// No other thread reads or writes element `i` until the next barrier.
    pub unsafe fn set(&self, i: usize, v: T) {
        *self.cell[i].get() = v;
    }
}

/// The part of `0..n` thread `tid` of `threads` takes.
pub fn share(n: usize, tid: usize, threads: usize) -> Range<usize> {
    n * tid / threads..n * (tid + 1) / threads
}

/// Runs `f(tid)` for every `tid` in `0..threads`, `f(0)` on this thread, and returns when all
/// are done: scoped OS threads natively, the page's worker pool in a wasm build with shared
/// memory (`pool.rs`; as many as have joined), and this thread alone in a wasm build without.
pub fn run(threads: usize, f: &(dyn Fn(usize) + Sync)) {
    #[cfg(not(target_arch = "wasm32"))]
    std::thread::scope(|s| {
        for tid in 1..threads {
            s.spawn(move || f(tid));
        }
        f(0);
    });
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    super::pool::run(threads, f);
    #[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
    {
        let _ = threads;
        f(0);
    }
}

/// Threads a pass can have: the cores natively, the joined workers plus this thread in a wasm
/// build with shared memory, one otherwise.
pub fn available() -> usize {
    #[cfg(not(target_arch = "wasm32"))]
    return std::thread::available_parallelism().map_or(1, |n| n.get());
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    return super::pool::available();
    #[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
    return 1;
}

/// A pool worker's life in a wasm build with shared memory (see `pool.rs`). Never returns.
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub fn work() -> ! {
    super::pool::work()
}

/// Whether the thread that runs passes may block (see `pool.rs`).
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub fn set_caller_may_block(may: bool) {
    super::pool::set_caller_may_block(may)
}
