"""Offset planning: where a Kafka batch starts and where it ends.

The driver asks the broker for each partition's watermarks (:mod:`streamer.sources.kafka.client`)
and plans explicit offsets from them: :func:`resolve_start` turns the stored position (or
``starting_offsets``) into a concrete start for every partition, :func:`plan_end` caps
the batch at ``max_records_per_batch``. The end offsets are the position stored in the
table's commit, so a replay reads the very same records.
"""

from __future__ import annotations

from streamer.config.sources import KafkaSourceConfig
from streamer.errors import SourceError
from streamer.sources.position import KafkaOffsets


def resolve_start(
    config: KafkaSourceConfig, start: KafkaOffsets | None, low: dict[int, int], high: dict[int, int]
) -> KafkaOffsets:
    """Concrete start offsets for every partition; raises on data loss if configured to.

    Without a stored position, ``starting_offsets`` decides. Partitions that appeared
    since the stored position start at their earliest offset (like Spark does).
    """
    if start is not None and start.topic != config.topic:
        raise SourceError(f"stored position is for topic {start.topic!r}, the source reads {config.topic!r}")
    if start is None:
        so = config.starting_offsets
        if so == "earliest":
            offsets = dict(low)
        elif so == "latest":
            offsets = dict(high)
        else:
            unknown = sorted(set(so) - set(low))
            if unknown:
                raise SourceError(f"starting_offsets names partitions {unknown} that topic {config.topic!r} does not have")
            offsets = {p: so.get(p, low[p]) for p in low}
    else:
        offsets = {p: start.partitions.get(p, low[p]) for p in low}
        vanished = sorted(set(start.partitions) - set(low))
        if vanished:
            raise SourceError(f"partitions {vanished} of topic {config.topic!r} no longer exist (topic recreated?)")
    for p, o in offsets.items():
        if o < low[p] or o > high[p]:
            problem = (
                f"offset {o} of {config.topic}/{p} is outside the available range "
                f"[{low[p]}, {high[p]}] (deleted by retention, or the topic was recreated)"
            )
            if config.fail_on_data_loss:
                raise SourceError(problem + "; set fail_on_data_loss: false to skip ahead")
            offsets[p] = min(max(o, low[p]), high[p])
    return KafkaOffsets(topic=config.topic, partitions=offsets)


def plan_end(start: KafkaOffsets, high: dict[int, int], max_records: int | None) -> KafkaOffsets:
    """End offsets of the next batch: everything up to ``high``, capped at ``max_records``.

    Every partition with a backlog moves by at least one (none starves behind a busy one),
    and the rest of the cap is shared in proportion to what each has left, as Spark's
    ``maxOffsetsPerTrigger`` does. The cap is exact: a batch holds more than
    ``max_records`` only when more partitions than that have a backlog (one each).
    """
    backlog = {p: max(0, high[p] - o) for p, o in start.partitions.items()}
    total = sum(backlog.values())
    if max_records is None or total <= max_records:
        return KafkaOffsets(topic=start.topic, partitions={p: start.partitions[p] + n for p, n in backlog.items()})
    share = {p: min(n, 1) for p, n in backlog.items()}
    rest = {p: n - share[p] for p, n in backlog.items()}
    room = max(0, max_records - sum(share.values()))
    extra = {p: n * room // max(1, sum(rest.values())) for p, n in rest.items()}
    left = room - sum(extra.values())
    for p in sorted(rest, key=lambda p: -rest[p]):  # the rounding's remainder, largest first
        if left > 0 and extra[p] < rest[p]:
            extra[p] += 1
            left -= 1
    share = {p: share[p] + extra[p] for p in backlog}
    return KafkaOffsets(topic=start.topic, partitions={p: start.partitions[p] + share[p] for p in backlog})
