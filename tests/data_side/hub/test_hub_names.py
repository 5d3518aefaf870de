"""Hub organisation and repository names given on the command line."""

from __future__ import annotations

import pytest

from evalita_data.hub.names import HubNameError, check_org, check_repo_id


@pytest.mark.parametrize("name", ["evalitahf", "my-org", "a", "A.b_c-9", "x" * 96])
def test_valid_org_names_pass(name: str) -> None:
    assert check_org(name) == name


@pytest.mark.parametrize("name", ["", "..", "a/b", "-a", "a-", ".a", "a..b", "a--b", "a b", "x" * 97, "é"])
def test_invalid_org_names_are_refused(name: str) -> None:
    with pytest.raises(HubNameError, match="expected a Hub name"):
        check_org(name)


def test_repo_ids_need_exactly_two_valid_parts() -> None:
    assert check_repo_id("me/evalita-results") == "me/evalita-results"
    for bad in ["me", "me/", "/x", "a/b/c", "../x", "me/..", "me/a b"]:
        with pytest.raises(HubNameError, match="expected ORG/NAME"):
            check_repo_id(bad)
