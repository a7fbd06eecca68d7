//! Writing models: a sender retransmits over a lossy network until the
//! receiver acknowledges; guards, timers, `recv` and `choose`.

// ANCHOR: messages
/// What travels over the network.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Msg {
    Data { seq: u8, value: u8 },
    Ack { seq: u8 },
}
// ANCHOR_END: messages

// ANCHOR: process
/// Process 0 sends values, one at a time, until acknowledged; process 1
/// delivers them to its `log` in order.
#[derive(Debug, Default)]
pub struct Endpoint {
    next_seq: u8,
    awaiting: Option<(u8, u8)>,
    log: Vec<u8>,
    expected: u8,
}

#[cmc::process(msg = Msg)]
impl Endpoint {
    /// The sender picks a value to send: every choice is explored.
    #[handler(guard = Self::can_send)]
    fn send(&mut self, ctx: &mut cmc::Ctx<'_, Self>) {
        let value = cmc::choose(2) as u8;
        let seq = self.next_seq;
        self.awaiting = Some((seq, value));
        let _ = ctx.send(1, Msg::Data { seq, value });
        ctx.set_timer("retransmit");
    }

    fn can_send(&self, view: &cmc::View<'_, Self>) -> bool {
        view.me() == 0 && self.awaiting.is_none() && self.next_seq < 2
    }

    /// The timer's expiry: resend what is not acknowledged yet.
    #[handler(timer = "retransmit")]
    fn retransmit(&mut self, ctx: &mut cmc::Ctx<'_, Self>) {
        if let Some((seq, value)) = self.awaiting {
            let _ = ctx.send(1, Msg::Data { seq, value });
            ctx.set_timer("retransmit");
        }
    }

    /// Every pending message for this process is a separate successor.
    /// `fair`: an execution does not leave mail unread forever (this
    /// matters only to liveness properties, see "Properties").
    #[handler(fair, guard = Self::has_mail)]
    fn receive(&mut self, ctx: &mut cmc::Ctx<'_, Self>) {
        match ctx.recv() {
            Some((from, Msg::Data { seq, value })) => {
                if seq == self.expected {
                    self.log.push(value);
                    self.expected += 1;
                }
                let _ = ctx.send(from, Msg::Ack { seq });
            }
            Some((_, Msg::Ack { seq })) if self.awaiting.is_some_and(|(s, _)| s == seq) => {
                self.awaiting = None;
                self.next_seq += 1;
                ctx.cancel_timer("retransmit");
            }
            _ => {}
        }
    }

    fn has_mail(&self, view: &cmc::View<'_, Self>) -> bool {
        view.has_mail()
    }

    /// The receiver never logs more values than were sent.
    #[invariant]
    fn bounded_log(&self) -> bool {
        self.log.len() <= 2
    }
}
// ANCHOR_END: process

impl Endpoint {
    /// Values the receiver has logged.
    pub fn log_len(&self) -> usize {
        self.log.len()
    }

    /// Values the sender has had acknowledged or is sending.
    pub fn sent_len(&self) -> usize {
        self.next_seq as usize + usize::from(self.awaiting.is_some())
    }
}

// ANCHOR: model
/// Two endpoints over a lossy network that holds at most two messages.
#[cmc::model]
pub fn lossy_link() -> cmc::Model<Endpoint> {
    cmc::Model::new("lossy_link", 2, |_| Endpoint::default())
        .network(cmc::NetworkConfig::new().capacity(2).lossy(true))
        .quiescence_ok(true)
}
// ANCHOR_END: model
