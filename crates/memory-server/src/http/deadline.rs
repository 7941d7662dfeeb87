//! The body timeout: a request body that has not fully arrived by its deadline fails with
//! [`BodyTimeout`], which the extractors answer with 408.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The error of a request body still incomplete at its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub(crate) struct BodyTimeout(pub(crate) Duration);

/// A request body that fails with [`BodyTimeout`] once `timeout` has passed since it was
/// wrapped (the end of the request's headers) and it is still waiting for bytes.
#[derive(Debug)]
pub(super) struct DeadlineBody<B> {
    inner: B,
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
}

impl<B> DeadlineBody<B> {
    /// `inner`, due within `timeout` from now.
    pub(super) fn new(inner: B, timeout: Duration) -> Self {
        let deadline = Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(far_future);
        Self {
            inner,
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
            timeout,
        }
    }
}

/// A deadline no request reaches (about 30 years away).
fn far_future() -> Instant {
    let now = Instant::now();
    now.checked_add(Duration::from_secs(86_400 * 365 * 30))
        .unwrap_or(now)
}

impl<B> Body for DeadlineBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(Into::into))),
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(BodyTimeout(this.timeout).into()))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether `error` is, or was caused by, a [`BodyTimeout`].
pub(crate) fn is_body_timeout(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    // Bounded: the chains axum builds are a few levels deep.
    for _ in 0..16 {
        match current {
            Some(e) if e.downcast_ref::<BodyTimeout>().is_some() => return true,
            Some(e) => current = e.source(),
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// A body that never yields.
    struct Stalled;

    impl Body for Stalled {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Pending
        }
    }

    #[tokio::test]
    async fn a_stalled_body_fails_at_its_deadline_and_a_whole_one_does_not() {
        let error = DeadlineBody::new(Stalled, Duration::from_millis(20))
            .collect()
            .await
            .unwrap_err();
        assert!(is_body_timeout(&*error), "{error}");
        let body = DeadlineBody::new(
            http_body_util::Full::new(Bytes::from_static(b"whole")),
            Duration::from_secs(30),
        );
        assert_eq!(body.collect().await.unwrap().to_bytes(), "whole");
        // Through axum's extractor, as the routes read bodies.
        let request = axum::http::Request::new(axum::body::Body::new(DeadlineBody::new(
            Stalled,
            Duration::from_millis(20),
        )));
        let rejection = <Bytes as axum::extract::FromRequest<()>>::from_request(request, &())
            .await
            .unwrap_err();
        assert!(is_body_timeout(&rejection), "{rejection}");
    }
}
