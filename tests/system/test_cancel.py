"""Adversarial: cancelling a batch mid-flight, under ``python -X dev -W error``.

``tests/system/scripts/adv_cancel.py`` runs in a subprocess with asyncio debug mode and every
warning an error, against a sandbox (in its own thread) that holds each request for half
a second. It cancels ``submit_many`` (or abandons ``submit_stream``) while requests are in
flight. Cancellation must be re-raised, no task may be left, the session must be closed,
nothing may be printed on stderr (no "Unclosed client session", no "Task was destroyed
but it is pending", no ResourceWarning), and every document sent is journaled as settled
(unknown when its answer never came).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent / "scripts" / "adv_cancel.py"


def run(mode: str, tmp_path: Path) -> dict:
    result = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error", str(SCRIPT), mode, str(tmp_path / "j.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    return json.loads(result.stdout)


def test_cancelling_submit_many_reraises_and_leaves_nothing_behind(tmp_path):
    """Cancel submit_many with 8 requests in flight: CancelledError is re-raised, no task
    is left, the session is closed, stderr stays empty under -X dev -W error, and the 8
    in-flight documents are journaled as unknown.
    """
    report = run("cancel", tmp_path)
    assert report["cancelled"] is True
    assert report["tasks_left"] == []
    assert report["session_closed"] is True
    journal = report["journal"]
    assert journal["sent"] == 8
    assert journal["in_flight_without_settled"] == []
    assert len(journal["unknown"]) == 8


def test_abandoning_submit_stream_cancels_workers_and_journals_in_flight(tmp_path):
    """Break out of submit_stream after 3 outcomes and aclose it: no task left, session
    closed, stderr empty, and every document sent but not settled is journaled unknown.
    """
    report = run("stream", tmp_path)
    assert report["seen"] == 3
    assert report["tasks_left"] == []
    assert report["session_closed"] is True
    journal = report["journal"]
    assert journal["in_flight_without_settled"] == []
    assert journal["settled"] == journal["sent"]
    # Outcomes settled but not yet consumed stay journaled as accepted; the rest unknown.
    assert 0 < len(journal["unknown"]) <= journal["sent"] - 3


def test_cancelling_during_retry_backoff_is_clean(tmp_path):
    """Cancel while some documents sleep in a retry backoff (a 503 asked to wait 60 s):
    cancellation is prompt and clean (no task left, stderr empty).
    """
    report = run("backoff", tmp_path)
    assert report["cancelled"] is True
    assert report["tasks_left"] == []
    assert report["session_closed"] is True


def test_cancelling_during_retry_backoff_journals_those_documents_unknown(tmp_path):
    """Documents cancelled while sleeping in a retry backoff were sent (a 503 is an
    ambiguous answer): they are journaled as unknown like those waiting for an answer.
    """
    report = run("backoff", tmp_path)
    journal = report["journal"]
    assert journal["sent"] == 8
    assert journal["in_flight_without_settled"] == [], journal
