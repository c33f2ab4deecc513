"""What `cdk destroy` leaves: with `retainData` (the default) the data and what it needs; with
`retainData=false`, nothing."""

from __future__ import annotations

from tests.infra.conftest import Synth

ALARM_TOPIC_KEY = "AlarmTopicKey"


def _kept(synth: Synth) -> dict[str, str]:
    """The resources CloudFormation keeps on a delete or a replacement: logical id -> type."""
    return {
        logical_id: resource["Type"]
        for logical_id, resource in synth.resources.items()
        if "Retain" in (resource.get("DeletionPolicy"), resource.get("UpdateReplacePolicy"))
    }


def test_a_throwaway_stack_keeps_nothing_the_alarm_topic_s_key_included(
    throwaway_synth: Synth,
) -> None:
    """Found by an outside audit: the alarm topic's KMS key was always kept, a customer
    managed key left behind ($1 a month) by every destroyed throw-away stack."""
    key = throwaway_synth.logical_id(ALARM_TOPIC_KEY)

    assert throwaway_synth.resources[key]["DeletionPolicy"] == "Delete"
    assert _kept(throwaway_synth) == {}


def test_the_alarm_topic_s_key_is_kept_with_the_data(synth: Synth) -> None:
    key = synth.logical_id(ALARM_TOPIC_KEY)

    assert synth.resources[key]["DeletionPolicy"] == "Retain"
    assert "AWS::DynamoDB::Table" in _kept(synth).values()
