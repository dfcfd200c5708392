//! How many statements a piece of work sent to the database: the console reports it for each
//! page (`X-Kuatia-Statements`), and a test holds the list and the document page to a handful.
//! Both stores note every read and write they are asked for ([`note`]); only work run inside
//! [`counted`] is counted, so the count costs nothing elsewhere.

use std::cell::Cell;
use std::future::Future;

tokio::task_local! {
    static COUNT: Cell<u32>;
}

/// Runs `work`, answering what it returned and how many statements it sent (those noted on the
/// task that runs it).
pub async fn counted<F: Future>(work: F) -> (F::Output, u32) {
    COUNT
        .scope(Cell::new(0), async {
            let out = work.await;
            let n = COUNT.try_with(Cell::get).unwrap_or(0);
            (out, n)
        })
        .await
}

/// One statement sent (a store calls this for each read or write asked of it).
pub fn note() {
    let _ = COUNT.try_with(|c| c.set(c.get() + 1));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_the_statements_of_the_counted_work_are_counted() {
        note();
        let ((), n) = counted(async {
            note();
            note();
        })
        .await;
        assert_eq!(n, 2);
        let ((), none) = counted(async {}).await;
        assert_eq!(none, 0);
    }
}
