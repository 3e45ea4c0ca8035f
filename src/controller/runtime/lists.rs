//! At most [`AT_ONCE`] (`--concurrent-lists`) of an operator's watches list at a time.
//!
//! A watch starts with a list. With `--namespace` there is one watch per namespace and kind, and
//! with `--shards` every watch of a gained namespace lists again: three replicas over 24
//! namespaces sent the control plane dozens of lists at once. It failed list pages with 500 and
//! throttled lists, watches and writes with 429; the caches fell behind the objects, and at
//! 10,000 Configs almost every status write was refused once as stale (18,577 refusals, a 531 s
//! rollout; queued, none and 202 s: the Benchmark chapter). Queued, the same lists run one after
//! another; they all still happen.
//!
//! A list holds its place from the watch's `Init` to its `InitDone`. After an error the place
//! is given back (the watch backs off before it tries again) and taken again before the watch
//! goes on; the events of a watch that has listed pass freely.

use std::pin::Pin;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::runtime::watcher::{Error, Event};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many lists run at once unless `--concurrent-lists` says otherwise: two keep the
/// control plane busy while one page is decoded here.
pub const AT_ONCE: usize = 2;

/// The places an operator's watches take to list (one set per operator: [`crate::controller::Context`]).
#[derive(Clone, Debug)]
pub struct Lists(Option<Arc<Semaphore>>);

impl Lists {
    /// At most `at_once` lists at a time (`0`: any number).
    pub fn new(at_once: usize) -> Self {
        Self((at_once > 0).then(|| Arc::new(Semaphore::new(at_once))))
    }

    /// `events`, a watch, listing only while it holds one of the places. Put it right behind
    /// `watcher(…)`, before its backoff, so no place is held while it waits to try again (kube's
    /// own retries of a 429 or 5xx within one list request do hold it: they are the list).
    ///
    /// For list-then-watch watchers only (`InitialListStrategy::ListWatch`, kube's default and
    /// every watch of aigw's): there `Init` comes before the list request is sent. A streaming
    /// list opens its request before `Init`, and its answer would wait unread behind the queue.
    pub fn queued<K, S>(&self, events: S) -> BoxStream<'static, Result<Event<K>, Error>>
    where
        K: Send + 'static,
        S: Stream<Item = Result<Event<K>, Error>> + Send + 'static,
    {
        match &self.0 {
            Some(places) => queued_on(places.clone(), events).boxed(),
            None => events.boxed(),
        }
    }
}

struct Queue<K> {
    events: Pin<Box<dyn Stream<Item = Result<Event<K>, Error>> + Send>>,
    places: Arc<Semaphore>,
    place: Option<OwnedSemaphorePermit>,
    /// Between an `Init` and its `InitDone`.
    listing: bool,
}

fn queued_on<K, S>(
    places: Arc<Semaphore>,
    events: S,
) -> impl Stream<Item = Result<Event<K>, Error>> + Send + 'static
where
    K: Send + 'static,
    S: Stream<Item = Result<Event<K>, Error>> + Send + 'static,
{
    let queue = Queue {
        events: Box::pin(events),
        places,
        place: None,
        listing: false,
    };
    futures::stream::unfold(queue, |mut queue| async move {
        if queue.listing && queue.place.is_none() {
            // The semaphore is never closed; if it were, the list would go on unqueued.
            queue.place = queue.places.clone().acquire_owned().await.ok();
        }
        let event = queue.events.next().await?;
        match &event {
            // The watcher asks for the first page when it is polled next.
            Ok(Event::Init) => queue.listing = true,
            Ok(Event::InitDone) => {
                queue.listing = false;
                queue.place = None;
            }
            Err(_) => queue.place = None,
            Ok(_) => {}
        }
        Some((event, queue))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::mpsc;
    use std::time::Duration;

    type Sent = mpsc::UnboundedSender<Result<Event<u32>, Error>>;

    fn watch(places: &Arc<Semaphore>) -> (Sent, impl Stream<Item = Result<Event<u32>, Error>>) {
        let (tx, rx) = mpsc::unbounded();
        (tx, Box::pin(queued_on(places.clone(), rx)))
    }

    async fn next<S: Stream + Unpin>(events: &mut S) -> Option<S::Item> {
        tokio::time::timeout(Duration::from_millis(50), events.next())
            .await
            .ok()
            .flatten()
    }

    #[tokio::test]
    async fn a_list_waits_for_a_place_and_a_listed_watch_does_not() {
        let places = Arc::new(Semaphore::new(1));
        let (a_tx, mut a) = watch(&places);
        let (b_tx, mut b) = watch(&places);
        a_tx.unbounded_send(Ok(Event::Init)).unwrap();
        a_tx.unbounded_send(Ok(Event::InitApply(1))).unwrap();
        b_tx.unbounded_send(Ok(Event::Init)).unwrap();
        b_tx.unbounded_send(Ok(Event::InitApply(2))).unwrap();

        assert!(matches!(next(&mut a).await, Some(Ok(Event::Init))));
        assert!(matches!(next(&mut a).await, Some(Ok(Event::InitApply(1)))));
        // b's Init passes; its first page waits while a lists.
        assert!(matches!(next(&mut b).await, Some(Ok(Event::Init))));
        assert!(next(&mut b).await.is_none());

        a_tx.unbounded_send(Ok(Event::InitDone)).unwrap();
        assert!(matches!(next(&mut a).await, Some(Ok(Event::InitDone))));
        assert!(matches!(next(&mut b).await, Some(Ok(Event::InitApply(2)))));

        // a watches now, while b lists: its events pass.
        a_tx.unbounded_send(Ok(Event::Apply(3))).unwrap();
        assert!(matches!(next(&mut a).await, Some(Ok(Event::Apply(3)))));
    }

    #[tokio::test]
    async fn an_error_gives_the_place_back_and_a_dropped_watch_too() {
        let places = Arc::new(Semaphore::new(1));
        let (a_tx, mut a) = watch(&places);
        a_tx.unbounded_send(Ok(Event::Init)).unwrap();
        a_tx.unbounded_send(Err(Error::NoResourceVersion)).unwrap();
        assert!(matches!(next(&mut a).await, Some(Ok(Event::Init))));
        assert!(matches!(next(&mut a).await, Some(Err(_))));
        assert_eq!(places.available_permits(), 1, "held while backing off");

        // Listing again (the watcher starts over with Init): the place is taken again.
        a_tx.unbounded_send(Ok(Event::Init)).unwrap();
        a_tx.unbounded_send(Ok(Event::InitApply(1))).unwrap();
        assert!(matches!(next(&mut a).await, Some(Ok(Event::Init))));
        assert!(matches!(next(&mut a).await, Some(Ok(Event::InitApply(1)))));
        assert_eq!(places.available_permits(), 0);
        drop(a);
        assert_eq!(places.available_permits(), 1, "a watch dropped mid-list");
    }
}
