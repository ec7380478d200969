"""The local parallel run's order of starting (benchmark/cluster/parallel.py): the longest chain of work first."""

import json

from benchmark.cluster.parallel import durations, priorities

STAGES = [  # the embedded default's shape: data, trains, their logits, SVE's training (on data only), evaluate
    {"name": "data", "upstream": []},
    {"name": "train@a", "upstream": ["data"]},
    {"name": "train@b", "upstream": ["data"]},
    {"name": "logits@a", "upstream": ["train@a"]},
    {"name": "logits@b", "upstream": ["train@b"]},
    {"name": "sve-train", "upstream": ["data"]},
    {"name": "evaluate", "upstream": ["logits@a", "logits@b", "sve-train"]},
]


def test_the_longest_chain_first_from_the_timing_record(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "timings.json").write_text(
        json.dumps(
            {
                "stages": [
                    {"stage": "data", "wall_s": 3},
                    {"stage": "train@a", "wall_s": 20},
                    {"stage": "train@b", "wall_s": 25},
                    {"stage": "logits@a", "wall_s": 8},
                    {"stage": "logits@b", "wall_s": 9},
                    {"stage": "sve-train", "wall_s": 40},
                    {"stage": "gone@x", "wall_s": 99},
                ]
            }
        )
    )
    seconds = durations(tmp_path)
    assert seconds["sve-train"] == 40.0 and "evaluate" not in seconds
    chain = priorities(STAGES, seconds)
    # evaluate has no record: the median of the known ones (20 s)
    assert chain["evaluate"] == 20 and chain["sve-train"] == 60 and chain["train@b"] == 25 + 9 + 20
    assert chain["data"] == 3 + 60  # its longest chain goes through SVE's training
    ready = sorted(["train@a", "train@b", "sve-train"], key=lambda n: -chain[n])
    assert ready == ["sve-train", "train@b", "train@a"]  # SVE's training, last in dvc repro's order, starts first
    assert durations(tmp_path / "nowhere") == {}  # no record: every stage 1 s, the chains count stages
    assert priorities(STAGES, {})["data"] == 4
