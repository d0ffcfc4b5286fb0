"""Outcomes, and RetryPolicy.delay: the one backoff of the package, and its testing hook."""

from __future__ import annotations

import random

import pytest

from invoicing_async import Outcome, OutcomeStatus, RetryPolicy
from invoicing_async.testing import instant_retries


@pytest.mark.parametrize("status", list(OutcomeStatus))
def test_ok_means_the_provider_holds_the_document(status):
    """Only accepted and duplicate are ok."""
    outcome = Outcome(index=0, key="k", status=status)
    assert outcome.ok is (status in (OutcomeStatus.ACCEPTED, OutcomeStatus.DUPLICATE))


def test_backoff_is_capped_exponential_with_full_jitter():
    """Attempt n waits uniformly up to base * 2**(n-1), never more than max_delay."""
    policy = RetryPolicy(base_delay=0.5, max_delay=3.0)
    rng = random.Random(1)
    for attempt, cap in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (10, 3.0)]:
        delays = [policy.delay(attempt, rng=rng) for _ in range(200)]
        assert all(0 <= d <= cap for d in delays)
        assert max(delays) > cap * 0.8  # the whole range is used, not a fixed step


def test_retry_after_is_honoured():
    """A provider's Retry-After replaces the computed backoff."""
    assert RetryPolicy().delay(1, retry_after=7) == 7.0


def test_instant_retries_zeroes_every_delay_and_restores():
    """The public testing hook makes every delay zero, Retry-After included, then restores."""
    policy = RetryPolicy(base_delay=10, max_delay=10)
    with instant_retries():
        assert policy.delay(5) == 0.0
        assert policy.delay(1, retry_after=60) == 0.0
        with instant_retries():
            pass
        assert policy.delay(5) == 0.0  # nested blocks restore the outer setting
    assert policy.delay(1, retry_after=60) == 60.0
