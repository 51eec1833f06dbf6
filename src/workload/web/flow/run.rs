//! A flow as a run sends it: what every user shares (the journey, the
//! addresses' bases, the run's own headers) and one request of a user's
//! journey on its connection, redirects followed as the flow asks.

use super::user::{FlowUser, Target};
use super::{Flow, MAX_KEPT_BODY, MAX_REDIRECTS};
use crate::measure::{ErrorKind, OpResult, Outcome};
use crate::sut::http::HttpBase;
use crate::workload::web::client::{Client, Expect};
use crate::workload::web::targets::HttpMethod;

/// The journey and where its requests go.
pub(crate) struct FlowShared {
    pub(crate) flow: Flow,
    bases: Vec<HttpBase>,
    /// Each base's `host:port`.
    authorities: Vec<String>,
    /// The run's own headers (`--header`).
    common: Vec<(String, String)>,
}

impl FlowShared {
    pub(crate) fn new(flow: Flow, bases: Vec<HttpBase>, common: Vec<(String, String)>) -> Self {
        FlowShared {
            flow,
            authorities: bases.iter().map(HttpBase::authority).collect(),
            bases,
            common,
        }
    }

    fn target(&self, a: usize, close: bool) -> Target<'_> {
        Target {
            base: &self.bases[a],
            authority: &self.authorities[a],
            common: &self.common,
            close,
        }
    }

    /// Each request of the journey to each address as user 0 first
    /// writes it (no value captured yet): the pre-flight request, and the
    /// longest request's size.
    pub(crate) fn first_requests(&self, close: bool) -> Vec<Box<[u8]>> {
        let mut out = Vec::new();
        for a in 0..self.bases.len() {
            let mut user = FlowUser::new(&self.flow, 0);
            for step in 0..self.flow.steps.len() {
                user.step = step;
                user.render(&self.flow, &self.target(a, close));
                out.push(user.request.clone().into_boxed_slice());
            }
        }
        out
    }

    /// The user's next request at address `a`, and its redirects as the
    /// flow asks. A 3xx reply not followed is the answer, a success; a
    /// success whose capture found nothing is an error of kind `capture`.
    pub(crate) async fn exchange(
        &self,
        user: &mut FlowUser,
        client: &mut Client,
        a: usize,
        close: bool,
    ) -> Outcome {
        let flow = &self.flow;
        let to = self.target(a, close);
        let step = &flow.steps[user.step];
        client.keep_replies(if step.keeps_body { MAX_KEPT_BODY } else { 0 });
        user.render(flow, &to);
        let mut expect = Expect {
            size: None,
            checksum: None,
            head: step.method == HttpMethod::Head,
            close,
        };
        let mut outcome = client.exchange(&user.request, expect).await;
        let mut bytes = outcome.bytes;
        let mut hops = 0;
        while let OpResult::Error(ErrorKind::Http(status @ 300..=399)) = outcome.result {
            if !flow.follow_redirects || hops == MAX_REDIRECTS {
                break;
            }
            let (head, _) = client.kept();
            if flow.cookies {
                user.keep_cookies(head);
            }
            let Some(redirect) = user.redirect(flow, head, status, &to) else {
                break;
            };
            expect.head = redirect.head;
            outcome = client.exchange(&user.request, expect).await;
            bytes = bytes.saturating_add(outcome.bytes);
            hops += 1;
        }
        let succeeded = match outcome.result {
            OpResult::Ok => true,
            OpResult::Error(ErrorKind::Http(300..=399)) => !flow.follow_redirects,
            _ => false,
        };
        let (head, body) = client.kept();
        if !user.after(flow, head, body, succeeded) {
            return Outcome::error(ErrorKind::Capture);
        }
        if succeeded {
            Outcome {
                bytes,
                ..Outcome::ok()
            }
        } else {
            outcome
        }
    }
}
