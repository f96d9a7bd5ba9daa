//! A few blocking calls at once, on scoped threads: files finished, synced
//! or uploaded side by side.

/// `f` over `items`, at most `at_once` at a time, in their order; the first
/// error, if any. One item runs on the calling thread.
pub fn map<T: Send, R: Send, E: Send>(
    items: Vec<T>,
    at_once: usize,
    f: impl Fn(T) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E> {
    if items.len() <= 1 {
        return items.into_iter().map(f).collect();
    }
    let threads = at_once.clamp(1, items.len());
    let queue = std::sync::Mutex::new(items.into_iter().enumerate());
    let mut done: Vec<(usize, Result<R, E>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                        let Some((i, item)) = next else { return done };
                        done.push((i, f(item)));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_the_order_and_returns_the_first_error() {
        let squares = super::map((0..50).collect(), 4, |i: u64| Ok::<_, String>(i * i)).unwrap();
        assert_eq!(squares, (0..50).map(|i| i * i).collect::<Vec<_>>());
        let failed = super::map((0..50).collect(), 4, |i: u64| if i % 7 == 3 { Err(i) } else { Ok(i) });
        assert_eq!(failed, Err(3));
        assert_eq!(super::map(vec![9], 4, |i: u64| Ok::<_, ()>(i + 1)), Ok(vec![10]));
    }
}
