"""Forged provider keys judged by the library, GnuPG, ``sq`` and pysequoia: never looser.

Every key of :mod:`forgedkeys` (correctly signed by :mod:`forger`: revocations in SHA-1 or
dated ahead, stripped user ids, misplaced signatures, bindings older than their key,
malformed packets …) is given to GnuPG 2.2 (``gpg --encrypt`` to it on an isolated home:
the subkey it picks, or a refusal), ``sq encrypt`` (Sequoia 1.x: the subkeys it encrypts
to) and pysequoia (a newer Sequoia). The library

* refuses whenever GnuPG and Sequoia (``sq`` or pysequoia) both refuse;
* when it accepts, encrypts to the subkey GnuPG picks, which Sequoia encrypts to too;
* differs only where the case documents the rule that makes it stricter
  (``Forged.stricter``), and such a difference still exists (no stale excuse), unless
  the case says a peer's verdict depends on the key material (``Forged.varies``: the
  forger's keys are new each run);
* judged again later (validity is a property of now), encrypts where GnuPG with that
  clock (``--faked-system-time``) would, or refuses as it does (``sq encrypt --time`` of
  sq 0.27 dates the message but does not judge the key at that time, so only GnuPG is
  asked).
"""

from __future__ import annotations

import functools

import forgedkeys as fk
import peerfactory as pf
import pytest

from invoicing_async._doc.pgp import armor

pytestmark = pytest.mark.interop

CASES = [pytest.param(case, id=case.name) for case in fk.CASES]
LATER = [pytest.param(case, id=case.name) for case in fk.CASES if case.later]


def _armored(case: fk.Forged) -> str:
    return armor(case.made.data, "PUBLIC KEY BLOCK").decode("ascii")


@functools.cache
def _peers(name: str) -> tuple[str | None, frozenset[str] | None, frozenset[str] | None]:
    """GnuPG's pick, sq's and pysequoia's recipients for a case (None: refused)."""
    case = fk.CASES_BY_NAME[name]
    data = case.made.data
    return pf.gnupg_choice(_armored(case)), pf.sq_choice(data), pf.pysequoia_choice(data)


@pytest.mark.parametrize("case", CASES)
def test_never_looser_than_gnupg_and_sequoia(case: fk.Forged):
    """The library's verdict on a forged key against GnuPG's, sq's and pysequoia's."""
    for peer in ("gnupg", "sq", "pysequoia"):
        pf.PEERS[peer].require()
    made = case.made
    ours = fk.verdict(made)
    gnupg, sq, pysequoia = _peers(case.name)
    shown = (
        f"library {made.named(ours)}, GnuPG {made.named(gnupg)}, "
        f"sq {sorted(map(made.named, sq or ())) or 'refuses'}, "
        f"pysequoia {sorted(map(made.named, pysequoia or ())) or 'refuses'}"
    )
    assert ours == made.expected(case.expect), shown
    accepting = [choice for choice in (sq, pysequoia) if choice is not None]
    both_refuse = gnupg is None and len(accepting) < 2  # Sequoia: sq or pysequoia refuses
    refused = len(ours) != 16
    if both_refuse:
        assert refused, f"GnuPG and Sequoia refuse, the library does not: {shown}"
    agrees = both_refuse or (
        not refused and gnupg in (None, ours) and all(ours in c for c in accepting)
    )
    if agrees:
        assert case.stricter is None or case.varies, f"documented difference gone: {shown}"
        return
    assert case.stricter is not None, f"undocumented difference: {shown}"
    if not refused:  # the subkey used is one an accepting peer uses
        assert ours == gnupg or any(ours in c for c in accepting), shown


@pytest.mark.parametrize("case", LATER)
def test_later_verdict_is_gnupgs(case: fk.Forged):
    """Judged later, the library encrypts where GnuPG would then, or refuses as it does."""
    assert case.later is not None
    made = case.made
    ours = fk.verdict(made, at=case.at_later)
    gnupg = pf.gnupg_choice(_armored(case), at=case.at_later)
    assert ours == made.expected(case.later[1])
    if gnupg is None:
        assert len(ours) != 16, f"GnuPG refuses then, the library uses {made.named(ours)}"
    else:
        assert ours == gnupg, f"library {made.named(ours)}, GnuPG {made.named(gnupg)}"
