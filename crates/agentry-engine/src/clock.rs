//! An injected clock, so that tests can control time: the engine reads "now" and waits for
//! deadlines and retry delays through it. [`SystemClock`] is the wall clock; [`ManualClock`]
//! moves only when a test advances it, and wakes what waits on it then.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;

/// A wait of [`Clock::sleep_until`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The source of "now" for the engine, and of its waits.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;

    /// Resolves once this clock reads `at` or later.
    fn sleep_until(&self, at: DateTime<Utc>) -> Sleep;

    /// Resolves once `d` has passed on this clock.
    fn sleep(&self, d: Duration) -> Sleep {
        let d = chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX);
        self.sleep_until(
            self.now()
                .checked_add_signed(d)
                .unwrap_or(DateTime::<Utc>::MAX_UTC),
        )
    }
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> Sleep {
        let wait = (at - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        Box::pin(tokio::time::sleep(wait))
    }
}

/// A clock that stands still until [`ManualClock::advance`] or [`ManualClock::set`] moves it;
/// every wait whose time has come then resolves. For tests: a one-hour deadline or a
/// ten-minute retry delay is reached by advancing the clock, not by waiting.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
    moved: watch::Sender<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock reading `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(start),
            moved: watch::channel(start).0,
        }
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *now += chrono::Duration::from_std(d).expect("a duration a test can advance by");
        self.moved.send_replace(*now);
    }

    /// Sets the clock to `t` (which may be earlier: a clock that jumps back).
    pub fn set(&self, t: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) = t;
        self.moved.send_replace(t);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> Sleep {
        let mut moved = self.moved.subscribe();
        Box::pin(async move {
            // Never resolves if the clock is dropped before `at`, like a sleep past the end.
            if moved.wait_for(|now| *now >= at).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_manual_clock_wakes_waits_whose_time_came() {
        let start = Utc::now();
        let clock = std::sync::Arc::new(ManualClock::new(start));
        let soon = tokio::spawn(clock.sleep(Duration::from_secs(60)));
        let later = tokio::spawn(clock.sleep(Duration::from_secs(3600)));
        tokio::task::yield_now().await;
        assert!(!soon.is_finished());
        clock.advance(Duration::from_secs(61));
        soon.await.unwrap();
        tokio::task::yield_now().await;
        assert!(!later.is_finished());
        clock.advance(Duration::from_secs(3600));
        later.await.unwrap();
        assert_eq!(clock.now(), start + chrono::Duration::seconds(3661));
    }
}
