"""A deferred sale: a till never waits on the provider.

The life of one sale (``docs/architecture.rst`` draws it):

1. :class:`~._sale.Deferral` sends it as a single call does, within its budget; the
   decision core ends its attempts at once when the provider is certainly unreachable
   or throttles (the table's ``sale_ends`` column), and says why to defer it (``defer``);
2. a sale that is not answered is made durable in the till's outbox (:mod:`._outbox`: an
   outbox entry, and its deferral record beside it) before a
   :class:`~._records.DeferredReceipt` is returned, with the offline QR url;
3. :class:`~._provider.ProviderState` remembers that the provider is down: later sales
   are deferred at once, and the drainer probes with one document at a time;
4. the :class:`~._drainer.Drainer` (an outbox worker) sends it once the provider answers,
   and hands its :class:`~._records.DeferredOutcome` to the application, at least once.

The durable queue is the outbox, and only the outbox (:class:`~._outbox.TillOutbox` is
what a till needs of one).
"""

from ._records import Backlog, DeferralReason, DeferredOutcome, DeferredReceipt
from ._sale import Deferral

__all__ = ["Backlog", "Deferral", "DeferralReason", "DeferredOutcome", "DeferredReceipt"]
