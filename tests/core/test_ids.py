"""One id codec: every prefixed id is read with the same bounds; sessions are minted once."""

from __future__ import annotations

import pytest

from memhub.core.errors import MemhubError
from memhub.core.ids import CLM, DEC, MAX_ID, MEM, NOTE, PROJ, new_session_id, parse_session


def test_ids_round_trip_with_their_prefix() -> None:
    for codec, prefix in ((MEM, "mem_"), (PROJ, "proj_"), (CLM, "clm_"), (DEC, "dec_"), (NOTE, "note_")):
        assert codec(7) == f"{prefix}7"
        assert codec.parse(codec(7)) == 7 and codec.parse(f"  {prefix}{MAX_ID} ") == MAX_ID


def test_every_codec_has_the_same_bounds() -> None:
    for codec in (MEM, PROJ, CLM, DEC, NOTE):
        p = codec.prefix
        for bad in (
            f"{p}0",
            f"{p}{MAX_ID + 1}",
            f"{p}{'1' * 20}",
            f"{p}-1",
            f"{p}４２",
            f"{p}",
            "x",
            f"{p}1a",
        ):
            assert codec.parse(bad) is None, bad


def test_bare_digits_are_read_where_the_toolset_shows_them() -> None:
    assert MEM.parse("12") == PROJ.parse("12") == DEC.parse("12") == 12  # discussion shows decisions as 42
    assert CLM.parse("12") is None and NOTE.parse("12") is None  # pce ids always carry clm_


def test_require_names_the_parameter_without_echoing_much() -> None:
    with pytest.raises(MemhubError) as raised:
        MEM.require("mem_zzz" + "z" * 100)
    assert raised.value.message.startswith("memory_id must look like mem_123, got 'mem_zzz")
    assert len(raised.value.message) < 90
    with pytest.raises(MemhubError, match="project_id must look like proj_123"):
        PROJ.require("proj_0")


def test_session_ids_are_minted_and_checked_in_one_place() -> None:
    minted = {new_session_id() for _ in range(50)}
    assert len(minted) == 50 and all(parse_session(s) == s for s in minted)
    for bad in ("sess_", "1a2b", "sess_a b", "sess_" + "a" * 65, "sess_é"):
        with pytest.raises(MemhubError, match="session_id must look like sess_1a2b3c"):
            parse_session(bad)
