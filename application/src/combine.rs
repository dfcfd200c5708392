//! Combining: concurrent callers of one serialised piece of work share its turns.
//!
//! Some work runs one turn at a time (a transaction behind the append lock, the numbering of a
//! document series), and doing it once per caller would pay the turn's fixed cost — a commit and
//! its fsync, a read of the series' next number — each time. Instead every caller queues its
//! request; whoever takes the leader lock drains the queue (up to a weight limit) and runs
//! everything queued as one batch, while later arrivals queue for the next turn. Each request
//! still gets its own answer.
//!
//! - The batch runs in a task of its own ([`tokio::spawn`] in the caller's `run`): a caller that
//!   goes away (a client disconnecting) cannot cancel work that carries other callers' requests.
//! - Batches keep the queue's order, and [`Combiner::submit_all`] queues its requests together,
//!   so a caller that needs its requests handled in order (numbers drawn in order, say) gets them
//!   in order.
//! - A caller already answered returns at once; only the unanswered compete to lead. (Queuing for
//!   the leader lock just to read an answer would keep callers from queuing new work and shrink
//!   every batch.)
//! - A combiner may *gather* before each batch ([`Combiner::with_gather`]): the leader waits on
//!   the given future (for callers known to be on their way, say) before it takes the queue.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A queued request and where its answer goes.
pub struct Waiting<Req, Res> {
    /// The request.
    pub request: Req,
    /// Its answer.
    pub reply: oneshot::Sender<Res>,
}

/// What a leader waits on before it takes a batch (see [`Combiner::with_gather`]).
pub type Gather = Box<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// The queue and the leader lock.
pub struct Combiner<Req, Res> {
    pending: Mutex<Vec<Waiting<Req, Res>>>,
    leader: tokio::sync::Mutex<()>,
    max_weight: usize,
    weight: fn(&Req) -> usize,
    gather: Option<Gather>,
}

impl<Req, Res> std::fmt::Debug for Combiner<Req, Res> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Combiner")
            .field("max_weight", &self.max_weight)
            .finish_non_exhaustive()
    }
}

impl<Req, Res> Combiner<Req, Res> {
    /// A queue whose batches weigh at most `max_weight` by `weight` (one request always fits).
    pub fn new(max_weight: usize, weight: fn(&Req) -> usize) -> Self {
        Self {
            pending: Mutex::new(Vec::new()),
            leader: tokio::sync::Mutex::new(()),
            max_weight: max_weight.max(1),
            weight,
            gather: None,
        }
    }

    /// Before taking each batch the leader awaits `gather()` (it should end soon: every request
    /// queued meanwhile waits with it), so that requests known to be on their way join the batch
    /// instead of the next one.
    #[must_use]
    pub fn with_gather(mut self, gather: Gather) -> Self {
        self.gather = Some(gather);
        self
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Vec<Waiting<Req, Res>>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Requests queued and not yet taken into a batch.
    pub fn queued(&self) -> usize {
        self.queue().len()
    }

    fn take_batch(&self) -> Vec<Waiting<Req, Res>> {
        let mut pending = self.queue();
        let mut weight = 0;
        let mut take = 0;
        for waiting in pending.iter() {
            weight += (self.weight)(&waiting.request);
            if take > 0 && weight > self.max_weight {
                break;
            }
            take += 1;
        }
        pending.drain(..take).collect()
    }

    /// Queues a request and returns its answer; `run` starts a batch's work (in a task of its
    /// own) and must answer every request of it. `None`: the batch holding the request ended
    /// without answering it (its task panicked or was aborted).
    pub async fn submit(
        &self,
        request: Req,
        run: impl Fn(Vec<Waiting<Req, Res>>) -> JoinHandle<()>,
    ) -> Option<Res> {
        self.submit_all(vec![request], run).await.pop().flatten()
    }

    /// Queues requests one after the other (no other caller's request between them) and returns
    /// their answers in the same order.
    pub async fn submit_all(
        &self,
        requests: Vec<Req>,
        run: impl Fn(Vec<Waiting<Req, Res>>) -> JoinHandle<()>,
    ) -> Vec<Option<Res>> {
        let answers: Vec<oneshot::Receiver<Res>> = {
            let mut pending = self.queue();
            requests
                .into_iter()
                .map(|request| {
                    let (reply, answer) = oneshot::channel();
                    pending.push(Waiting { request, reply });
                    answer
                })
                .collect()
        };
        let mut out = Vec::with_capacity(answers.len());
        for answer in answers {
            out.push(self.wait(answer, &run).await);
        }
        out
    }

    async fn wait(
        &self,
        mut answer: oneshot::Receiver<Res>,
        run: &impl Fn(Vec<Waiting<Req, Res>>) -> JoinHandle<()>,
    ) -> Option<Res> {
        loop {
            let leader = tokio::select! {
                biased;
                res = &mut answer => return res.ok(),
                guard = self.leader.lock() => guard,
            };
            match answer.try_recv() {
                Ok(res) => return Some(res),
                Err(oneshot::error::TryRecvError::Closed) => return None,
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            if let Some(gather) = &self.gather {
                gather().await;
            }
            let batch = self.take_batch();
            if batch.is_empty() {
                // Ours is in a batch whose leader went away; its task still answers.
                drop(leader);
                return answer.await.ok();
            }
            let _ = run(batch).await;
            drop(leader);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    type Batches = Arc<Mutex<Vec<Vec<u32>>>>;

    /// Runs a batch: records it, waits a little (so that others queue meanwhile), answers each
    /// request with its double.
    fn runner(batches: Batches) -> impl Fn(Vec<Waiting<u32, u32>>) -> JoinHandle<()> {
        move |batch| {
            let batches = batches.clone();
            tokio::spawn(async move {
                batches
                    .lock()
                    .unwrap()
                    .push(batch.iter().map(|w| w.request).collect());
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                for w in batch {
                    let _ = w.reply.send(w.request * 2);
                }
            })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_share_batches_and_each_gets_its_own_answer() {
        let combiner = Arc::new(Combiner::<u32, u32>::new(10, |_| 1));
        let batches: Batches = Arc::default();
        let tasks: Vec<_> = (0..40u32)
            .map(|i| {
                let (combiner, batches) = (combiner.clone(), batches.clone());
                tokio::spawn(async move { combiner.submit(i, runner(batches)).await })
            })
            .collect();
        for (i, task) in tasks.into_iter().enumerate() {
            assert_eq!(task.await.unwrap(), Some(i as u32 * 2));
        }
        let batches = batches.lock().unwrap();
        let mut seen: Vec<u32> = batches.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..40).collect::<Vec<_>>(), "each request ran exactly once");
        assert!(
            batches.iter().all(|b| b.len() <= 10),
            "the weight limit holds: {batches:?}"
        );
        assert!(
            batches.len() < 40,
            "forty concurrent callers need fewer than forty turns: {batches:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn submit_all_keeps_its_requests_together_and_in_order() {
        let combiner = Arc::new(Combiner::<u32, u32>::new(100, |_| 1));
        let batches: Batches = Arc::default();
        // Others queue single requests while two callers queue runs of ten.
        let mut tasks = Vec::new();
        for base in [100u32, 200] {
            let (combiner, batches) = (combiner.clone(), batches.clone());
            tasks.push(tokio::spawn(async move {
                let answers = combiner
                    .submit_all((base..base + 10).collect(), runner(batches))
                    .await;
                assert_eq!(
                    answers,
                    (base..base + 10).map(|n| Some(n * 2)).collect::<Vec<_>>()
                );
            }));
        }
        for i in 0..10u32 {
            let (combiner, batches) = (combiner.clone(), batches.clone());
            tasks.push(tokio::spawn(async move {
                assert_eq!(combiner.submit(i, runner(batches)).await, Some(i * 2));
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let order: Vec<u32> = batches.lock().unwrap().iter().flatten().copied().collect();
        for base in [100u32, 200] {
            let at = order.iter().position(|&n| n == base).unwrap();
            assert_eq!(
                order[at..at + 10],
                (base..base + 10).collect::<Vec<_>>(),
                "a run is queued contiguously and in order: {order:?}"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_leader_that_gathers_takes_the_requests_that_arrive_meanwhile() {
        // The first caller leads at once; its gathering lasts until the other four have queued,
        // so one batch holds all five. Without the gather the first runs alone.
        let queued = Arc::new(tokio::sync::Semaphore::new(0));
        let gate = queued.clone();
        let combiner = Arc::new(
            Combiner::<u32, u32>::new(10, |_| 1).with_gather(Box::new(move || {
                let gate = gate.clone();
                Box::pin(async move {
                    let _ = gate
                        .acquire_many(4)
                        .await
                        .map(tokio::sync::SemaphorePermit::forget);
                })
            })),
        );
        let batches: Batches = Arc::default();
        let first = {
            let (combiner, batches) = (combiner.clone(), batches.clone());
            tokio::spawn(async move { combiner.submit(0, runner(batches)).await })
        };
        let mut others = Vec::new();
        for i in 1..5u32 {
            while combiner.queued() < i as usize {
                tokio::task::yield_now().await;
            }
            let (queue, batches) = (combiner.clone(), batches.clone());
            others.push(tokio::spawn(
                async move { queue.submit(i, runner(batches)).await },
            ));
            while combiner.queued() < i as usize + 1 {
                tokio::task::yield_now().await;
            }
            queued.add_permits(1);
        }
        assert_eq!(first.await.unwrap(), Some(0));
        for (i, other) in others.into_iter().enumerate() {
            assert_eq!(other.await.unwrap(), Some((i as u32 + 1) * 2));
        }
        assert_eq!(*batches.lock().unwrap(), vec![vec![0, 1, 2, 3, 4]]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_that_dies_answers_none_and_later_turns_still_run() {
        let combiner = Arc::new(Combiner::<u32, u32>::new(1, |_| 1));
        let turns = Arc::new(AtomicUsize::new(0));
        let run = {
            let turns = turns.clone();
            move |batch: Vec<Waiting<u32, u32>>| {
                let turns = turns.clone();
                tokio::spawn(async move {
                    turns.fetch_add(1, Ordering::SeqCst);
                    let w = batch.into_iter().next().unwrap();
                    if w.request == 0 {
                        panic!("the first batch's work fails");
                    }
                    let _ = w.reply.send(w.request);
                })
            }
        };
        assert_eq!(combiner.submit(0, &run).await, None);
        assert_eq!(combiner.submit(7, &run).await, Some(7));
        assert_eq!(turns.load(Ordering::SeqCst), 2);
        assert_eq!(combiner.queued(), 0);
    }
}
