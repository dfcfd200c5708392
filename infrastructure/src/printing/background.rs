//! Threads of low priority for renders nobody is waiting on (the KuDE of an accepted document).
//!
//! A KuDE takes ~30 ms of CPU, ten times what intake, signing and sending a document take
//! together. Rendered on the blocking pool at normal priority, the renders of a busy hour take the
//! cores from the requests and the SIFEN pipeline, and everything slows down to the rate of the
//! renderer. Here they run on their own threads, one per core, each at `nice` 19 (Linux sets the
//! nice value per thread): the kernel gives them whatever CPU the rest leaves idle, so on a quiet
//! service a KuDE is there as soon as before, and under load it comes when the load eases —
//! the document is accepted, numbered and downloadable as XML meanwhile.
//!
//! Rejected: a separate, smaller worker pool at normal priority (it still takes a core from the
//! requests while it renders) and rendering only on first download (a delivery by email needs
//! the PDF anyway, and the first reader would wait for it).

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};

/// The nice value of the render threads: the lowest priority.
pub const NICE: i32 = 19;

type Task = Box<dyn FnOnce() + Send>;

/// The threads' queue, started on first use.
static QUEUE: OnceLock<Mutex<Sender<Task>>> = OnceLock::new();

fn queue() -> &'static Mutex<Sender<Task>> {
    QUEUE.get_or_init(|| {
        let (tx, rx) = channel::<Task>();
        let rx = Arc::new(Mutex::new(rx));
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        for n in 0..threads {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("kuatia-render-{n}"))
                .spawn(move || serve(&rx));
            if let Err(err) = spawned {
                tracing::error!(error = %err, "starting a background render thread failed");
            }
        }
        Mutex::new(tx)
    })
}

/// One thread: lower its priority, then run tasks until the process ends.
fn serve(rx: &Mutex<Receiver<Task>>) {
    if let Err(err) = lower_priority() {
        tracing::warn!(error = %err, "could not lower a render thread's priority; it renders at normal priority");
    }
    loop {
        let task = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        match task {
            // A panic stays in its task: the caller sees its answer dropped.
            Ok(task) => {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(task));
            }
            Err(_) => return,
        }
    }
}

#[cfg(target_os = "linux")]
fn lower_priority() -> std::io::Result<()> {
    // On Linux `setpriority(PRIO_PROCESS, tid)` sets the nice value of that one thread.
    rustix::process::setpriority_process(Some(rustix::thread::gettid()), NICE).map_err(std::io::Error::from)
}

#[cfg(not(target_os = "linux"))]
fn lower_priority() -> std::io::Result<()> {
    // Elsewhere the call would lower the whole process: leave the threads at normal priority.
    Ok(())
}

/// The nice value of the calling thread (Linux), for tests and diagnostics.
#[cfg(target_os = "linux")]
pub fn current_thread_nice() -> std::io::Result<i32> {
    rustix::process::getpriority_process(Some(rustix::thread::gettid())).map_err(std::io::Error::from)
}

/// The background threads stopped or the task panicked: no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost;

/// Runs `f` on a background render thread and waits for its result.
pub async fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Lost> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let task: Task = Box::new(move || {
        let _ = tx.send(f());
    });
    let sent = match queue().lock() {
        Ok(queue) => queue.send(task),
        Err(poisoned) => poisoned.into_inner().send(task),
    };
    sent.map_err(|_| Lost)?;
    rx.await.map_err(|_| Lost)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn background_work_runs_on_a_thread_of_the_lowest_priority_and_returns_its_result() {
        let outside = current_thread_nice().unwrap();
        let (nice, name) = run(|| {
            (
                current_thread_nice().unwrap(),
                std::thread::current().name().map(str::to_owned),
            )
        })
        .await
        .unwrap();
        assert_eq!(nice, NICE, "the render thread's nice value");
        assert!(name.unwrap_or_default().starts_with("kuatia-render-"));
        assert_eq!(
            current_thread_nice().unwrap(),
            outside,
            "the caller's own priority is unchanged"
        );
    }

    #[tokio::test]
    async fn a_task_that_panics_is_lost_and_the_threads_keep_serving() {
        let lost = run(|| -> u32 { panic!("a render that panics") }).await;
        assert_eq!(lost, Err(Lost));
        for n in 0..8u32 {
            assert_eq!(run(move || n * 2).await, Ok(n * 2));
        }
    }
}
