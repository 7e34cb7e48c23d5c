//! The threads of a pass in a wasm build with shared memory: Web Workers that the JavaScript
//! side starts once per page, each running [`work`] on the same module and memory. A pass
//! publishes one job (the closure every thread runs with its id) and the workers that had
//! joined when it started run it; the caller runs id 0 and returns when all are done.
//!
//! Workers sleep in `memory.atomic.wait32` between passes (a worker may block; the page's main
//! thread may not, so the caller only spins).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use core::arch::wasm32::{memory_atomic_notify, memory_atomic_wait32};

/// Workers that have joined, each with id 1..=JOINED.
static JOINED: AtomicUsize = AtomicUsize::new(0);
/// Bumped once per job; workers wait on it.
static SEQUENCE: AtomicU32 = AtomicU32::new(0);
/// Workers still running the current job.
static PENDING: AtomicUsize = AtomicUsize::new(0);
/// One job at a time (passes of different models serialize here).
static RUNNING: Mutex<()> = Mutex::new(());

/// The current job: the closure (a fat pointer, as its two words), and in one word the
/// sequence number it was published under and how many threads run it, so that a worker reads
/// both at once and never takes one job's thread count for another's. Plain atomics rather
/// than a lock: the caller may be the page's main thread, which must not block. The closure
/// lives on the caller's stack until [`run`] returns, after every worker is done with it.
static JOB: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
static JOB_HEADER: AtomicU64 = AtomicU64::new(0);

type Erased = *const (dyn Fn(usize) + Sync);

/// Whether the thread that calls [`run`] may block (it is a worker, not a page's main thread):
/// told by the JavaScript side, which knows.
static CALLER_MAY_BLOCK: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set in the pool's workers, which may always block.
    static IS_WORKER: Cell<bool> = const { Cell::new(false) };
}

pub fn set_caller_may_block(may: bool) {
    CALLER_MAY_BLOCK.store(may, Ordering::Release);
}

fn may_block() -> bool {
    IS_WORKER.with(Cell::get) || CALLER_MAY_BLOCK.load(Ordering::Acquire)
}

/// Sleeps until `word` changes from `seen`, a notification, or a millisecond, where this thread
/// may block; returns at once otherwise.
pub fn park(word: &AtomicUsize, seen: usize) {
    if may_block() {
        // SAFETY: a live atomic; usize is 32 bits on wasm32.
        unsafe { memory_atomic_wait32(word.as_ptr() as *mut i32, seen as i32, 1_000_000) };
    }
}

/// Wakes every thread parked on `word`.
pub fn unpark(word: &AtomicUsize) {
    // SAFETY: a live atomic.
    unsafe { memory_atomic_notify(word.as_ptr() as *mut i32, u32::MAX) };
}

/// Threads a pass can have now: the caller and every worker that has joined.
pub fn available() -> usize {
    JOINED.load(Ordering::Acquire) + 1
}

/// A worker's life: joins with the next id, then runs every job published after that. Never
/// returns.
pub fn work() -> ! {
    IS_WORKER.with(|w| w.set(true));
    let mut seen = SEQUENCE.load(Ordering::Acquire);
    let tid = JOINED.fetch_add(1, Ordering::AcqRel) + 1;
    loop {
        while SEQUENCE.load(Ordering::Acquire) == seen {
            // SAFETY: the address is a live static i32-sized atomic; waiting is allowed in a worker.
            unsafe { memory_atomic_wait32(SEQUENCE.as_ptr() as *mut i32, seen as i32, -1) };
        }
        seen = SEQUENCE.load(Ordering::Acquire);
        let header = JOB_HEADER.load(Ordering::Acquire);
        // A job published under another number is not this wake-up's; workers that joined
        // after the job started are not among its threads.
        if (header >> 32) as u32 == seen && tid < (header & 0xffff_ffff) as usize {
            let words = [JOB[0].load(Ordering::Acquire), JOB[1].load(Ordering::Acquire)];
            // SAFETY: the words are a pointer `run` stored from a live closure, which it keeps
            // alive until PENDING reaches zero.
            unsafe {
                let f: Erased = std::mem::transmute::<[usize; 2], Erased>(words);
                (*f)(tid);
            }
            if PENDING.fetch_sub(1, Ordering::AcqRel) == 1 {
                unpark(&PENDING);
            }
        }
    }
}

/// Runs `f(0)` here and `f(1)`..`f(threads - 1)` on workers; `threads` at most [`available`].
pub fn run(threads: usize, f: &(dyn Fn(usize) + Sync)) {
    let threads = threads.clamp(1, available());
    if threads == 1 {
        return f(0);
    }
    let _one = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: the lifetime is erased only until this function returns, after every worker has
    // finished with the closure (PENDING = 0); a fat pointer is two words.
    let words = unsafe { std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), [usize; 2]>(f) };
    PENDING.store(threads - 1, Ordering::Release);
    JOB[0].store(words[0], Ordering::Release);
    JOB[1].store(words[1], Ordering::Release);
    let next = SEQUENCE.load(Ordering::Acquire).wrapping_add(1);
    JOB_HEADER.store(((next as u64) << 32) | threads as u64, Ordering::Release);
    SEQUENCE.store(next, Ordering::Release);
    // SAFETY: a live static address.
    unsafe { memory_atomic_notify(SEQUENCE.as_ptr() as *mut i32, u32::MAX) };
    f(0);
    let mut spins = 0u32;
    loop {
        let pending = PENDING.load(Ordering::Acquire);
        if pending == 0 {
            break;
        }
        if spins < 2000 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            park(&PENDING, pending);
        }
    }
}
