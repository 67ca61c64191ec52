//! One loop for the node's periodic background jobs (the recrawl
//! scheduler, the liveness probe, the renewal of registrations): wait a
//! tick, run a round, and stop when the token fires, whether waiting or
//! in the middle of a round.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Spawns a task that runs `round` every `tick` (the first one tick after
/// the start) until `cancel` fires; a round in progress is dropped then.
pub fn every<F, Fut>(
    tick: Duration,
    cancel: CancellationToken,
    mut round: F,
) -> tokio::task::JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                () = tokio::time::sleep(tick) => {}
            }
            tokio::select! {
                () = cancel.cancelled() => break,
                () = round() => {}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn rounds_come_a_tick_apart_and_stop_with_the_token() {
        let rounds = Arc::new(AtomicUsize::new(0));
        let cancel = CancellationToken::new();
        let counted = rounds.clone();
        let task = every(Duration::from_secs(5), cancel.clone(), move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        });
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(
            rounds.load(Ordering::SeqCst),
            0,
            "none before the first tick"
        );
        tokio::time::sleep(Duration::from_secs(12)).await;
        assert_eq!(rounds.load(Ordering::SeqCst), 3);
        cancel.cancel();
        task.await.unwrap();
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(
            rounds.load(Ordering::SeqCst),
            3,
            "none after the token fired"
        );
    }
}
