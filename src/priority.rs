//! Thread priority for background work: the threads that do a node's bulk
//! work (the text index's writer, an import's validation) lower their own
//! scheduling priority, so that on a busy machine the threads answering
//! queries (the runtime's workers and its blocking pool) are run first.
//! On a two-core machine an import otherwise takes both cores, and every
//! search waits behind it.
//!
//! Linux keeps a nice value per thread (`setpriority(2)` on a thread id
//! changes that thread alone); elsewhere this does nothing.

/// The nice value background threads take (0 is the default, 19 the
/// lowest priority): low enough that a query preempts them, not so low
/// that they starve on a machine that is busy for long.
pub const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's priority to [`BACKGROUND_NICE`]. Call it
/// first thing in a thread the node spawned for background work, never on
/// a thread of the async runtime or its blocking pool (they run queries
/// too). Best effort: a refusal by the system leaves the thread as it was.
pub fn lower_current_thread() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions; setpriority with
        // PRIO_PROCESS and a thread id only changes that thread's nice
        // value (or fails with an error code, which is ignored).
        unsafe {
            let tid = libc::gettid();
            let _ = libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, BACKGROUND_NICE);
        }
    }
}

/// Runs `work` to completion on a thread of its own at background
/// priority, on a current-thread runtime made for it; the blocking tasks
/// it spawns run on that runtime's own pool, whose threads inherit the
/// lowered priority. The receiver answers `work`'s output, or an error
/// when the thread could not start or `work` panicked.
///
/// For bulk work a request starts on a serving node (`POST
/// /admin/import`): it still shares the store and the channels of the
/// node's runtime, but the CPU goes to queries first.
pub fn spawn_background<F>(name: &str, work: F) -> tokio::sync::oneshot::Receiver<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            lower_current_thread();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            match runtime {
                Ok(rt) => {
                    let _ = tx.send(rt.block_on(work));
                }
                Err(e) => tracing::error!(error = %e, "no runtime for background work"),
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "could not start a background thread");
    }
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's nice value, where the system says (Linux).
    fn current_thread_nice() -> Option<i32> {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: as above; getpriority only reads.
            unsafe {
                let tid = libc::gettid();
                // -1 is also a valid nice value: errno tells them apart.
                *libc::__errno_location() = 0;
                let nice = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
                (*libc::__errno_location() == 0).then_some(nice)
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_background_thread_lowers_itself_and_no_other_thread() {
        let before = current_thread_nice().unwrap();
        let inside = std::thread::spawn(|| {
            lower_current_thread();
            current_thread_nice()
        })
        .join()
        .unwrap();
        if before <= BACKGROUND_NICE {
            assert_eq!(inside, Some(BACKGROUND_NICE));
        }
        assert_eq!(
            current_thread_nice(),
            Some(before),
            "the caller is untouched"
        );
    }

    #[tokio::test]
    async fn background_work_runs_lowered_and_its_blocking_tasks_too() {
        let before = current_thread_nice();
        let (outer, inner) = spawn_background("test-background", async {
            let inner = tokio::task::spawn_blocking(current_thread_nice)
                .await
                .unwrap();
            (current_thread_nice(), inner)
        })
        .await
        .unwrap();
        if cfg!(target_os = "linux") && before.is_some_and(|b| b <= BACKGROUND_NICE) {
            assert_eq!(outer, Some(BACKGROUND_NICE));
            assert_eq!(inner, Some(BACKGROUND_NICE));
        }
        assert_eq!(current_thread_nice(), before);
    }
}
